#include "metron/plan/plan_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "metron/base/json_layout.h"
#include "metron/plan/configuration_text.h"
#include "metron/scenario/scenario.h"

namespace metron::plan {
namespace {

using Json = nlohmann::ordered_json;

/// One cell of a ranked configuration; monostate is "the default applies".
using Value = std::variant<std::monostate, std::int64_t, double, bool, std::string>;

/// A column of Note [plan report fields]: its name and how to read it from a ranked
/// configuration (rank is 1-based). One list, so CSV and JSON cannot drift apart.
struct Field {
  std::string_view name;
  Value (*get)(const PlannedConfig& config, std::int64_t rank);
};

template <class T>
Value optional_value(const std::optional<T>& value) {
  if (!value) return std::monostate{};
  return static_cast<std::int64_t>(*value);
}

const std::array<Field, 31> kFields{{
    {"rank", [](const PlannedConfig&, std::int64_t r) -> Value { return r; }},
    {"tokens_per_s", [](const PlannedConfig& c, std::int64_t) -> Value { return c.tokens_per_s; }},
    {"iteration_time_ms",
     [](const PlannedConfig& c, std::int64_t) -> Value { return c.iteration_time_s * 1e3; }},
    {"mfu", [](const PlannedConfig& c, std::int64_t) -> Value { return c.mfu; }},
    {"bubble_fraction",
     [](const PlannedConfig& c, std::int64_t) -> Value { return c.bubble_fraction; }},
    {"exposed_comm_fraction",
     [](const PlannedConfig& c, std::int64_t) -> Value { return c.exposed_comm_fraction; }},
    {"peak_memory_bytes",
     [](const PlannedConfig& c, std::int64_t) -> Value { return c.peak_memory_bytes; }},
    {"memory_capacity_bytes",
     [](const PlannedConfig& c, std::int64_t) -> Value { return c.memory_capacity_bytes; }},
    {"gpus", [](const PlannedConfig& c, std::int64_t) -> Value { return c.gpus; }},
    {"tp", [](const PlannedConfig& c, std::int64_t) -> Value { return c.candidate.parallel.tp; }},
    {"pp", [](const PlannedConfig& c, std::int64_t) -> Value { return c.candidate.parallel.pp; }},
    {"dp", [](const PlannedConfig& c, std::int64_t) -> Value { return c.candidate.parallel.dp; }},
    {"vp", [](const PlannedConfig& c, std::int64_t) -> Value { return c.candidate.parallel.vp; }},
    // An uneven split's first and last pipeline ranks' layers (Note [uneven stages]); empty when
    // every rank holds the same.
    {"first_stage_layers",
     [](const PlannedConfig& c, std::int64_t) -> Value {
       return optional_value(c.candidate.parallel.first_stage_layers);
     }},
    {"last_stage_layers",
     [](const PlannedConfig& c, std::int64_t) -> Value {
       return optional_value(c.candidate.parallel.last_stage_layers);
     }},
    // Megatron's accounted split (Note [uneven stages]), the search's uneven split where
    // whole-chunk edge counts do not exist.
    {"account_for_embedding_in_pipeline_split",
     [](const PlannedConfig& c, std::int64_t) -> Value {
       return c.candidate.parallel.account_for_embedding_in_pipeline_split;
     }},
    {"account_for_loss_in_pipeline_split",
     [](const PlannedConfig& c, std::int64_t) -> Value {
       return c.candidate.parallel.account_for_loss_in_pipeline_split;
     }},
    {"cp", [](const PlannedConfig& c, std::int64_t) -> Value { return c.candidate.parallel.cp; }},
    {"ep", [](const PlannedConfig& c, std::int64_t) -> Value { return c.candidate.parallel.ep; }},
    {"sequence_parallel",
     [](const PlannedConfig& c, std::int64_t) -> Value {
       return c.candidate.parallel.sequence_parallel;
     }},
    {"microbatch_size",
     [](const PlannedConfig& c, std::int64_t) -> Value {
       return c.candidate.parallel.microbatch_size;
     }},
    {"num_microbatches",
     [](const PlannedConfig& c, std::int64_t) -> Value {
       return optional_value(c.candidate.parallel.microbatches());
     }},
    {"recompute",
     [](const PlannedConfig& c, std::int64_t) -> Value {
       return std::string(models::to_string(c.candidate.parallel.recompute));
     }},
    {"attention",
     [](const PlannedConfig& c, std::int64_t) -> Value {
       return std::string(models::to_string(c.candidate.parallel.attention));
     }},
    {"fp8",
     [](const PlannedConfig& c, std::int64_t) -> Value {
       return std::string(models::to_string(c.candidate.parallel.fp8));
     }},
    {"tp_comm_overlap",
     [](const PlannedConfig& c, std::int64_t) -> Value {
       return c.candidate.parallel.tp_comm_overlap;
     }},
    {"schedule",
     [](const PlannedConfig& c, std::int64_t) -> Value {
       return std::string(c.candidate.schedule);
     }},
    {"group_size",
     [](const PlannedConfig& c, std::int64_t) -> Value {
       return optional_value(c.candidate.group_size);
     }},
    {"policy",
     [](const PlannedConfig& c, std::int64_t) -> Value {
       return std::string(sync::to_string(c.candidate.policy));
     }},
    {"bucket_size",
     [](const PlannedConfig& c, std::int64_t) -> Value {
       return optional_value(c.candidate.bucket_size);
     }},
    {"bound_ms", [](const PlannedConfig& c, std::int64_t) -> Value { return c.bound_s * 1e3; }},
}};

/// RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string out = "\"";
  for (const char ch : text) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

struct CsvCell {
  std::string operator()(std::monostate /*unused*/) const { return ""; }
  std::string operator()(std::int64_t n) const { return fmt::format("{}", n); }
  // fmt's "{}" is the shortest text that reads back as the same double.
  std::string operator()(double x) const { return fmt::format("{}", x); }
  std::string operator()(bool b) const { return b ? "true" : "false"; }
  std::string operator()(const std::string& s) const { return csv_field(s); }
};

struct JsonCell {
  Json operator()(std::monostate /*unused*/) const { return nullptr; }
  template <class T>
  Json operator()(const T& value) const {
    return value;
  }
};

/// 1234567 → "1,234,567".
std::string grouped(std::int64_t n) {
  std::string digits = fmt::format("{}", n < 0 ? -n : n);
  for (auto i = static_cast<std::ptrdiff_t>(digits.size()) - 3; i > 0; i -= 3) {
    digits.insert(static_cast<std::size_t>(i), ",");
  }
  return n < 0 ? "-" + digits : digits;
}

std::string rounded(double x) { return grouped(std::llround(x)); }

std::string percent(double fraction) { return fmt::format("{:.1f}%", 100 * fraction); }

std::string gigabytes(double bytes) { return fmt::format("{:.1f}", bytes / 1e9); }

std::string plural(std::int64_t n, std::string_view one, std::string_view many) {
  return grouped(n) + " " + std::string(n == 1 ? one : many);
}

std::int64_t seq_len_of(const PlanRequest& request) {
  return request.seq_len != 0 ? request.seq_len : request.model.seq_len;
}

/// Rows of cells laid out in columns: the last column left-aligned and unpadded, the others
/// right-aligned to their widest cell.
std::string aligned(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    for (std::size_t i = 0; i + 1 < row.size(); ++i) {
      out += fmt::format("{:>{}}  ", row[i], width[i]);
    }
    out += row.back() + "\n";
  }
  return out;
}

std::int64_t total_dropped(const PlanStats& stats) {
  return std::accumulate(stats.dropped.begin(), stats.dropped.end(), std::int64_t{0});
}

constexpr std::size_t kFamiliesPerReason = 20;

std::string explain_reason(DropReason reason, std::int64_t configurations,
                           const std::vector<const DroppedFamily*>& families) {
  const std::string count =
      plural(static_cast<std::int64_t>(families.size()), "family", "families");
  // Families rejected above the complete configurations are not counted (search_space.h).
  std::string out =
      configurations == 0
          ? fmt::format("  {}: {}, rejected before enumeration\n", to_string(reason), count)
          : fmt::format("  {}: {} dropped, {}\n", to_string(reason),
                        plural(configurations, "configuration", "configurations"), count);
  for (std::size_t i = 0; i < families.size() && i < kFamiliesPerReason; ++i) {
    const DroppedFamily& f = *families[i];
    out += fmt::format("    {}: {}", f.family, f.detail);
    if (f.configurations > 0) {
      out += fmt::format(" ({})", plural(f.configurations, "configuration", "configurations"));
    }
    out += "\n";
  }
  if (families.size() > kFamiliesPerReason) {
    out += fmt::format("    ... and {} more\n",
                       grouped(static_cast<std::int64_t>(families.size() - kFamiliesPerReason)));
  }
  return out;
}

}  // namespace

std::string ranked_table(const PlanRequest& request, const PlanResult& result) {
  std::string out =
      fmt::format("{} on {}, up to {} GPUs, global batch {}, sequence {}: ", request.model.name,
                  request.hardware.name, grouped(request.gpus), grouped(request.global_batch),
                  grouped(seq_len_of(request)));
  if (result.ranked.empty()) {
    return out + fmt::format("no configuration fits ({}); see the dropped families (--explain)\n",
                             plural(result.stats.enumerated, "configuration", "configurations") +
                                 " enumerated");
  }
  out += fmt::format("the {} by tokens/s\n",
                     result.ranked.size() == 1
                         ? std::string("best configuration")
                         : fmt::format("{} best configurations", result.ranked.size()));
  std::vector<std::vector<std::string>> rows{{"rank", "tokens/s", "iteration ms", "MFU", "bubble",
                                              "exposed comm", "memory GB", "GPUs",
                                              "configuration"}};
  for (std::size_t i = 0; i < result.ranked.size(); ++i) {
    const PlannedConfig& c = result.ranked[i];
    rows.push_back({fmt::format("{}", i + 1), rounded(c.tokens_per_s),
                    fmt::format("{:.2f}", c.iteration_time_s * 1e3), percent(c.mfu),
                    percent(c.bubble_fraction), percent(c.exposed_comm_fraction),
                    gigabytes(c.peak_memory_bytes) + "/" + gigabytes(c.memory_capacity_bytes),
                    grouped(c.gpus), describe(request, c.candidate)});
  }
  return out + aligned(rows);
}

std::string plan_csv(const PlanResult& result) {
  std::string out;
  for (const Field& field : kFields) {
    out += (out.empty() ? "" : ",") + std::string(field.name);
  }
  out += "\n";
  for (std::size_t i = 0; i < result.ranked.size(); ++i) {
    std::string row;
    for (const Field& field : kFields) {
      if (&field != kFields.data()) row += ",";
      row += std::visit(CsvCell{}, field.get(result.ranked[i], static_cast<std::int64_t>(i + 1)));
    }
    out += row + "\n";
  }
  return out;
}

std::string plan_json(const PlanRequest& request, const PlanResult& result,
                      const ComparedConfig* compared) {
  Json root;
  root["request"] = {{"model", request.model.name},    {"hardware", request.hardware.name},
                     {"gpus", request.gpus},           {"global_batch", request.global_batch},
                     {"seq_len", seq_len_of(request)}, {"memory_headroom", request.memory_headroom},
                     {"top_k", request.top_k}};
  Json ranked = Json::array();
  for (std::size_t i = 0; i < result.ranked.size(); ++i) {
    Json entry;
    for (const Field& field : kFields) {
      entry[std::string(field.name)] =
          std::visit(JsonCell{}, field.get(result.ranked[i], static_cast<std::int64_t>(i + 1)));
    }
    entry["configuration"] = describe(request, result.ranked[i].candidate);
    entry["scenario"] = Json::parse(to_json(result.ranked[i].scenario));
    ranked.push_back(std::move(entry));
  }
  root["ranked"] = std::move(ranked);
  if (compared != nullptr) {
    Json entry;
    for (const Field& field : kFields) {
      entry[std::string(field.name)] = std::visit(JsonCell{}, field.get(compared->config, 0));
    }
    entry["rank"] = compared->rank ? Json(*compared->rank) : Json(nullptr);
    entry["configuration"] = describe(request, compared->config.candidate);
    entry["problem"] = compared->problem;
    if (compared->problem.empty()) {
      entry["scenario"] = Json::parse(to_json(compared->config.scenario));
    }
    root["compared"] = std::move(entry);
  }
  Json dropped = Json::array();
  for (const DroppedFamily& f : result.dropped) {
    dropped.push_back({{"reason", to_string(f.reason)},
                       {"family", f.family},
                       {"detail", f.detail},
                       {"configurations", f.configurations}});
  }
  root["dropped"] = std::move(dropped);
  const PlanStats& s = result.stats;
  Json by_reason = Json::object();
  for (std::size_t r = 0; r < kDropReasons; ++r) {
    by_reason[std::string(to_string(static_cast<DropReason>(r)))] = s.dropped[r];
  }
  // Note [plan run statistics]: what follows from the request alone, then what depends on the
  // run (threads and timing decide how many configurations are simulated before the bound stops
  // the search; the ranking does not depend on it).
  root["stats"] = {
      {"enumerated", s.enumerated}, {"bounded", s.bounded}, {"dropped_by_reason", by_reason}};
  root["run"] = {{"simulated", s.simulated},
                 {"pruned", s.pruned},
                 {"threads", s.threads},
                 {"seconds", s.seconds},
                 {"phases",
                  {{"enumerate_s", s.phases.enumerate_s},
                   {"estimate_s", s.phases.estimate_s},
                   {"build_thread_s", s.phases.build_s},
                   {"simulate_thread_s", s.phases.simulate_s}}}};
  return dump_one_entry_per_line(root);
}

std::string explain_text(const PlanResult& result) {
  std::array<std::vector<const DroppedFamily*>, kDropReasons> families;
  for (const DroppedFamily& f : result.dropped) {
    families[static_cast<std::size_t>(f.reason)].push_back(&f);
  }
  std::string out = "Dropped, by reason:\n";
  bool any = false;
  for (std::size_t r = 0; r < kDropReasons; ++r) {
    if (families[r].empty() && result.stats.dropped[r] == 0) continue;
    out += explain_reason(static_cast<DropReason>(r), result.stats.dropped[r], families[r]);
    any = true;
  }
  if (!any) out += "  nothing\n";
  if (result.stats.pruned > 0) {
    out += fmt::format(
        "Pruned: {} not simulated, their lower bound above the time of the last ranked one\n",
        plural(result.stats.pruned, "configuration", "configurations"));
  }
  return out;
}

std::string stats_line(const PlanResult& result) {
  const PlanStats& s = result.stats;
  std::string reasons;
  for (std::size_t r = 0; r < kDropReasons; ++r) {
    if (s.dropped[r] == 0) continue;
    reasons += fmt::format("{}{} {}", reasons.empty() ? "" : ", ",
                           to_string(static_cast<DropReason>(r)), grouped(s.dropped[r]));
  }
  return fmt::format(
      "enumerated {}, dropped {}{}, bounded {}, simulated {}, pruned {}, in {:.2f} s on {}\n",
      plural(s.enumerated, "configuration", "configurations"), grouped(total_dropped(s)),
      reasons.empty() ? "" : " (" + reasons + ")", grouped(s.bounded), grouped(s.simulated),
      grouped(s.pruned), s.seconds, plural(s.threads, "thread", "threads"));
}

std::string phases_line(const PlanResult& result) {
  const PlanStats::Phases& p = result.stats.phases;
  return fmt::format(
      "time: enumerating {:.2f} s, estimating {:.2f} s, building steps {:.2f} s and simulating "
      "{:.2f} s (thread time)\n",
      p.enumerate_s, p.estimate_s, p.build_s, p.simulate_s);
}

namespace {

constexpr std::size_t kBeatersShown = 5;

/// The words of `configuration` that `other` does not have: what a faster one does differently.
std::string differing_fields(const std::string& configuration, const std::string& other) {
  const auto words = [](const std::string& text) {
    std::vector<std::string> out;
    std::size_t at = 0;
    while (at < text.size()) {
      const std::size_t end = std::min(text.find(' ', at), text.size());
      if (end > at) out.push_back(text.substr(at, end - at));
      at = end + 1;
    }
    return out;
  };
  const std::vector<std::string> theirs = words(other);
  std::string out;
  for (const std::string& w : words(configuration)) {
    if (std::find(theirs.begin(), theirs.end(), w) != theirs.end()) continue;
    out += (out.empty() ? "" : " ") + w;
  }
  return out.empty() ? "the same fields" : out;
}

}  // namespace

std::string comparison_text(const PlanResult& result, const ComparedConfig& compared) {
  const PlannedConfig& c = compared.config;
  const std::string name = describe(c.candidate);
  std::string out = fmt::format("compared with {} ({} GPUs):\n", name, grouped(c.gpus));
  if (!compared.problem.empty()) {
    return out + fmt::format("  it cannot run: {}\n", compared.problem);
  }
  out += fmt::format(
      "  predicted {:.2f} ms per iteration, {} tokens/s, MFU {}, bubble {}, exposed comm {}, "
      "memory {}/{} GB\n",
      c.iteration_time_s * 1e3, rounded(c.tokens_per_s), percent(c.mfu), percent(c.bubble_fraction),
      percent(c.exposed_comm_fraction), gigabytes(c.peak_memory_bytes),
      gigabytes(c.memory_capacity_bytes));
  std::vector<std::size_t> beaters;
  for (std::size_t i = 0; i < result.ranked.size(); ++i) {
    if (compared.rank && i + 1 >= *compared.rank) break;
    if (result.ranked[i].iteration_time_s < c.iteration_time_s || !compared.rank) {
      beaters.push_back(i);
    }
  }
  if (compared.rank) {
    out += fmt::format("  it ranks #{}", *compared.rank);
    out += beaters.empty()
               ? "; nothing the search found beats it\n"
               : fmt::format("; {} beat it:\n", plural(static_cast<std::int64_t>(beaters.size()),
                                                       "configuration", "configurations"));
  } else {
    out += fmt::format("  it ranks below all {} ranked; they beat it:\n",
                       grouped(static_cast<std::int64_t>(result.ranked.size())));
  }
  for (std::size_t k = 0; k < beaters.size() && k < kBeatersShown; ++k) {
    const PlannedConfig& b = result.ranked[beaters[k]];
    out += fmt::format(
        "    #{} {:.1f}% faster: {}; bubble {} ({}), exposed comm {} ({}), memory {} GB ({})\n",
        beaters[k] + 1, 100 * (1 - b.iteration_time_s / c.iteration_time_s),
        differing_fields(describe(b.candidate), name), percent(b.bubble_fraction),
        percent(c.bubble_fraction), percent(b.exposed_comm_fraction),
        percent(c.exposed_comm_fraction), gigabytes(b.peak_memory_bytes),
        gigabytes(c.peak_memory_bytes));
  }
  if (beaters.size() > kBeatersShown) {
    out += fmt::format("    ... and {} more\n",
                       grouped(static_cast<std::int64_t>(beaters.size() - kBeatersShown)));
  }
  return out;
}

}  // namespace metron::plan
