// Note [scenario JSON] (scenario.h): reading, writing and checking scenarios.

#include "metron/plan/scenario.h"

#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "metron/base/diagnostics.h"
#include "metron/base/error.h"
#include "metron/base/json_parse.h"
#include "metron/models/hardware_presets.h"
#include "metron/models/model_presets.h"
#include "metron/schedules/registry.h"

namespace metron::plan {
namespace {

using Json = nlohmann::ordered_json;

/// A wrong value at a JSON path, turned into a ParseError naming the source at the top.
struct PathError {
  std::string path;
  std::string what;
};

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw PathError{path, what};
}

std::string brief(const Json& v) {
  std::string text = v.dump();
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

/// Every key of `object` must be one of `known`: a typo must not be silently ignored.
void require_known_keys(const Json& object, const std::string& path,
                        std::initializer_list<std::string_view> known) {
  if (!object.is_object())
    fail(path.empty() ? "top level" : path, "expected an object, got " + brief(object));
  for (const auto& item : object.items()) {
    bool found = false;
    for (std::string_view k : known) found = found || k == item.key();
    if (!found) {
      std::string names;
      for (std::string_view k : known) names += (names.empty() ? "" : ", ") + std::string(k);
      fail((path.empty() ? "" : path + ".") + item.key(), "unknown key; expected one of " + names);
    }
  }
}

/// Runs a models reader on a sub-object; its unknown keys become errors naming the key's path.
template <class Read>
auto read_nested(const Json& value, const std::string& source, const std::string& key, Read read) {
  Diagnostics diagnostics;
  auto out = read(value.dump(), source + ": " + key, &diagnostics);
  if (diagnostics.count("unknown_key") > 0) {
    throw ParseError(source, 0, 0, key + "." + diagnostics.messages().front());
  }
  return out;
}

std::int32_t read_int32(const Json& v, const std::string& path) {
  if (!v.is_number_integer() || v.get<std::int64_t>() <= 0 ||
      v.get<std::int64_t>() > std::numeric_limits<std::int32_t>::max()) {
    fail(path, "expected a positive integer, got " + brief(v));
  }
  return v.get<std::int32_t>();
}

schedules::P2PMode read_p2p(const Json& v, const std::string& path) {
  if (v == "batched") return schedules::P2PMode::kBatched;
  if (v == "async") return schedules::P2PMode::kAsync;
  fail(path, "expected \"batched\" or \"async\", got " + brief(v));
}

ScheduleChoice read_schedule(const Json& v) {
  require_known_keys(v, "schedule", {"name", "group_size", "p2p", "memory_limit"});
  ScheduleChoice s;
  if (v.contains("name")) {
    if (!v["name"].is_string())
      fail("schedule.name", "expected a schedule name, got " + brief(v["name"]));
    s.name = v["name"].get<std::string>();
  }
  const auto optional_int = [&](const char* key) -> std::optional<std::int32_t> {
    if (!v.contains(key) || v[key].is_null()) return std::nullopt;
    return read_int32(v[key], std::string("schedule.") + key);
  };
  s.group_size = optional_int("group_size");
  s.memory_limit = optional_int("memory_limit");
  if (v.contains("p2p") && !v["p2p"].is_null()) s.p2p = read_p2p(v["p2p"], "schedule.p2p");
  return s;
}

models::StatePolicy read_sync(const Json& v) {
  require_known_keys(v, "sync", {"policy"});
  if (!v.contains("policy")) return models::StatePolicy::kDdp;
  const Json& p = v["policy"];
  const std::optional<models::StatePolicy> policy =
      p.is_string() ? models::parse_state_policy(p.get<std::string>()) : std::nullopt;
  if (!policy) {
    fail("sync.policy",
         "expected one of ddp, megatron-ddp, megatron-distopt, zero1, zero2, "
         "zero3, fsdp, got " +
             brief(p));
  }
  return *policy;
}

Scenario read_scenario(const Json& root, const std::string& source) {
  require_known_keys(root, "",
                     {"model", "hardware", "gpus", "parallel", "schedule", "sync", "costs"});
  Scenario s;
  s.hardware = models::hardware_preset("dgx-h100");
  if (root.contains("model") && !root["model"].is_null()) {
    const Json& m = root["model"];
    s.model = m.is_string() ? models::model_preset(m.get<std::string>())
                            : read_nested(m, source, "model",
                                          [](auto... a) { return models::model_from_json(a...); });
  }
  if (root.contains("hardware") && !root["hardware"].is_null()) {
    const Json& h = root["hardware"];
    s.hardware = h.is_string() ? models::hardware_preset(h.get<std::string>())
                               : read_nested(h, source, "hardware", [](auto... a) {
                                   return models::hardware_from_json(a...);
                                 });
  }
  if (root.contains("gpus") && !root["gpus"].is_null()) {
    const Json& g = root["gpus"];
    if (!g.is_number_integer() || g.get<std::int64_t>() <= 0) {
      fail("gpus", "expected a positive integer, got " + brief(g));
    }
    s.gpus = g.get<std::int64_t>();
  }
  if (!root.contains("parallel")) fail("parallel", "missing; expected the parallel sizes");
  s.parallel = read_nested(root["parallel"], source, "parallel",
                           [](auto... a) { return models::parallel_from_json(a...); });
  if (root.contains("schedule") && !root["schedule"].is_null()) {
    s.schedule = read_schedule(root["schedule"]);
  }
  if (root.contains("sync") && !root["sync"].is_null()) s.policy = read_sync(root["sync"]);
  if (root.contains("costs") && !root["costs"].is_null()) {
    Diagnostics diagnostics;
    s.costs = models::stage_costs_from_json(root["costs"].dump(), source, std::nullopt, "costs",
                                            &diagnostics);
    if (diagnostics.count("unknown_key") > 0) {
      throw ParseError(source, 0, 0, diagnostics.messages().front());
    }
  }
  return s;
}

Json spec_or_name(const std::string& json_text, const std::string& name, bool is_preset) {
  return is_preset ? Json(name) : Json::parse(json_text);
}

bool is_model_preset(const models::ModelSpec& m) {
  for (const auto& p : models::model_presets()) {
    if (p == m) return true;
  }
  return false;
}

bool is_hardware_preset(const models::HardwareSpec& h) {
  for (const auto& p : models::hardware_presets()) {
    if (p == h) return true;
  }
  return false;
}

}  // namespace

schedules::P2PMode p2p_mode(const ScheduleChoice& schedule) {
  if (schedule.p2p) return *schedule.p2p;
  const bool megatron = schedule.name == "1f1b" || schedule.name == "interleaved-1f1b" ||
                        schedule.name == "interleaved-1f1b-legacy";
  return megatron ? schedules::P2PMode::kBatched : schedules::P2PMode::kAsync;
}

Scenario default_scenario() {
  Scenario s;
  s.model = models::model_preset("gpt3-175b");
  s.hardware = models::hardware_preset("dgx-h100");
  s.gpus = 1024;
  s.parallel = {.tp = 8,
                .pp = 16,
                .dp = 8,
                .vp = 2,
                .sequence_parallel = true,
                .microbatch_size = 1,
                .global_batch = 1536,
                .seq_len = 2048};
  s.schedule = {.name = "interleaved-1f1b"};
  s.policy = models::StatePolicy::kMegatronDistopt;
  return s;
}

Scenario scenario_from_json(std::string_view text, const std::string& source) {
  const Json root = parse_json_document<Json>(text, source);
  try {
    return read_scenario(root, source);
  } catch (const PathError& e) {
    throw ParseError(source, 0, 0, e.path + ": " + e.what);
  }
}

std::string to_json(const Scenario& s) {
  Json out;
  if (s.model) {
    out["model"] =
        spec_or_name(models::to_json(*s.model), s.model->name, is_model_preset(*s.model));
  }
  out["hardware"] =
      spec_or_name(models::to_json(s.hardware), s.hardware.name, is_hardware_preset(s.hardware));
  if (s.gpus) out["gpus"] = *s.gpus;
  out["parallel"] = Json::parse(models::to_json(s.parallel));
  Json schedule = {{"name", s.schedule.name}};
  schedule["group_size"] = s.schedule.group_size ? Json(*s.schedule.group_size) : Json(nullptr);
  schedule["p2p"] =
      s.schedule.p2p ? Json(*s.schedule.p2p == schedules::P2PMode::kBatched ? "batched" : "async")
                     : Json(nullptr);
  schedule["memory_limit"] =
      s.schedule.memory_limit ? Json(*s.schedule.memory_limit) : Json(nullptr);
  out["schedule"] = schedule;
  out["sync"] = {{"policy", models::to_string(s.policy)}};
  out["costs"] = s.costs ? Json::parse(models::to_json(*s.costs)) : Json(nullptr);
  return out.dump(2) + "\n";
}

void validate(const Scenario& s) {
  if (!s.model && !s.costs) {
    throw InvalidConfig("scenario: expected a \"model\" or explicit \"costs\", got neither");
  }
  if (s.model) {
    models::validate(s.parallel, *s.model, s.gpus);
  } else if (!s.parallel.num_microbatches) {
    throw InvalidConfig(
        "scenario: with explicit costs and no model, parallel.num_microbatches is required");
  }
  if (s.schedule.p2p == schedules::P2PMode::kNone) {
    throw InvalidConfig("scenario: schedule.p2p must be \"batched\" or \"async\"");
  }
  (void)schedules::find_schedule(s.schedule.name);
}

}  // namespace metron::plan
