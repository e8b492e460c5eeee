// Note [scenario JSON] (scenario.h): reading, writing and checking scenarios.

#include "metron/scenario/scenario.h"

#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "json_paths.h"
#include "metron/base/diagnostics.h"
#include "metron/base/error.h"
#include "metron/base/json_parse.h"
#include "metron/models/hardware_presets.h"
#include "metron/models/model_presets.h"
#include "metron/pipeline/registry.h"
#include "sync_json.h"

namespace metron::scenario {
namespace {

using detail::brief;
using detail::fail;
using detail::Json;
using detail::PathError;
using detail::require_known_keys;

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

lowering::P2PMode read_p2p(const Json& v, const std::string& path) {
  if (v == "batched") return lowering::P2PMode::kBatched;
  if (v == "async") return lowering::P2PMode::kAsync;
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
    return detail::read_positive_int32(v[key], std::string("schedule.") + key);
  };
  s.group_size = optional_int("group_size");
  s.memory_limit = optional_int("memory_limit");
  if (v.contains("p2p") && !v["p2p"].is_null()) s.p2p = read_p2p(v["p2p"], "schedule.p2p");
  return s;
}

Scenario read_scenario(const Json& root, const std::string& source) {
  require_known_keys(
      root, "", {"model", "hardware", "gpus", "parallel", "schedule", "sync", "costs", "profile"});
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
  if (root.contains("sync") && !root["sync"].is_null()) s.sync = detail::read_sync(root["sync"]);
  if (root.contains("costs") && !root["costs"].is_null()) {
    Diagnostics diagnostics;
    s.costs = models::stage_costs_from_json(root["costs"].dump(), source, std::nullopt, "costs",
                                            &diagnostics);
    if (diagnostics.count("unknown_key") > 0) {
      throw ParseError(source, 0, 0, diagnostics.messages().front());
    }
  }
  if (root.contains("profile") && !root["profile"].is_null()) {
    Diagnostics diagnostics;
    s.profile =
        models::cost_profile_from_json(root["profile"].dump(), source + ": profile", &diagnostics);
    if (diagnostics.count("unknown_key") > 0) {
      throw ParseError(source, 0, 0, "profile: " + diagnostics.messages().front());
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

lowering::P2PMode p2p_mode(const ScheduleChoice& schedule) {
  if (schedule.p2p) return *schedule.p2p;
  const bool megatron = schedule.name == "1f1b" || schedule.name == "interleaved-1f1b" ||
                        schedule.name == "interleaved-1f1b-legacy";
  return megatron ? lowering::P2PMode::kBatched : lowering::P2PMode::kAsync;
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
                .global_batch = 1536};
  // The sequence length is left to the model's (gpt3-175b: 2,048), so that --model on the
  // built-in trains the new model at its own length, not GPT-3's.
  s.schedule = {.name = "interleaved-1f1b"};
  // Megatron's GPT-3 recipes overlap both directions of the distributed optimizer's traffic.
  s.sync = {.policy = sync::SyncPolicy::kMegatronDistopt,
            .overlap_grad_reduce = true,
            .overlap_param_gather = true};
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
  schedule["p2p"] = s.schedule.p2p
                        ? Json(*s.schedule.p2p == lowering::P2PMode::kBatched ? "batched" : "async")
                        : Json(nullptr);
  schedule["memory_limit"] =
      s.schedule.memory_limit ? Json(*s.schedule.memory_limit) : Json(nullptr);
  out["schedule"] = schedule;
  out["sync"] = detail::write_sync(s.sync);
  out["costs"] = s.costs ? Json::parse(models::to_json(*s.costs)) : Json(nullptr);
  if (s.profile) out["profile"] = Json::parse(models::to_json(*s.profile));
  return out.dump(2) + "\n";
}

models::StatePolicy state_policy(const Scenario& s) {
  const std::optional<models::StatePolicy> policy =
      models::parse_state_policy(sync::to_string(s.sync.policy));
  if (!policy) {
    throw InternalError(
        __FILE__, __LINE__,
        "sync policy " + std::string(sync::to_string(s.sync.policy)) + " has no memory layout");
  }
  return *policy;
}

models::ParallelSpec model_split(const Scenario& s) {
  const pipeline::ScheduleInfo& info = pipeline::find_schedule(s.schedule.name);
  models::ParallelSpec out = s.parallel;
  if (info.fixed_vp != 0 && out.vp == 1) out.vp = info.fixed_vp;
  if (info.placement == pipeline::Placement::kBidirectional) out.vp = 1;
  return out;
}

std::vector<std::int64_t> held_model_stages(std::string_view schedule, std::int64_t pp,
                                            std::int64_t rank) {
  if (pipeline::find_schedule(schedule).placement == pipeline::Placement::kBidirectional) {
    return {rank, pp - 1 - rank};
  }
  return {rank};
}

void validate(const Scenario& s) {
  if (!s.model && !s.costs) {
    throw InvalidConfig("scenario: expected a \"model\" or explicit \"costs\", got neither");
  }
  if (s.model) {
    models::validate(model_split(s), *s.model, s.gpus);
  } else if (!s.parallel.num_microbatches) {
    throw InvalidConfig(
        "scenario: with explicit costs and no model, parallel.num_microbatches is required");
  } else {
    // Without a model the sizes still bound the graph (Note [input limits]).
    models::validate_sizes(s.parallel);
  }
  if (s.schedule.p2p == lowering::P2PMode::kNone) {
    throw InvalidConfig("scenario: schedule.p2p must be \"batched\" or \"async\"");
  }
  (void)pipeline::find_schedule(s.schedule.name);
}

}  // namespace metron::scenario
