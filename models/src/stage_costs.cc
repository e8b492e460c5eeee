// StageCosts: explicit per-stage times read from a scenario's `costs` object (Note [costs JSON]).

#include "metron/models/stage_costs.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "json_reading.h"
#include "metron/base/error.h"
#include "metron/models/limits.h"
#include "spec_checks.h"

namespace metron::models {
namespace {

using detail::brief;
using detail::fail;
using detail::Json;
using detail::number_text;
using detail::ObjectReader;
using detail::read_non_negative_number;

// Note [costs JSON]: milliseconds in the file, seconds in memory.
constexpr double kMsPerSecond = 1000;
// B given with I and W must equal I + W. Decimals do not add exactly in binary (1.1 + 0.7 is
// 1.8000000000000003), so equal means equal to this relative precision, far above the rounding
// of one addition and far below any difference a user means.
constexpr double kSumTolerance = 1e-9;

// The value of `key`, or nullptr when it is absent or null ("B": null leaves B to default).
const Json* find_present(ObjectReader& in, std::string_view key) {
  const Json* v = in.find(key);
  return v == nullptr || v->is_null() ? nullptr : v;
}

// The length of a list value; nullopt for a single number. Fails for any other JSON.
std::optional<std::size_t> list_length(const Json& v, const std::string& path) {
  if (v.is_array()) {
    if (v.empty()) fail(path, "expected a number or a non-empty array of numbers, got []");
    return v.size();
  }
  if (!v.is_number()) fail(path, "expected a number or an array of numbers, got " + brief(v));
  return std::nullopt;
}

// Milliseconds of one task, at most a day (Note [input limits]): a larger time is a typo, and
// it would overflow the simulator's integer nanoseconds once summed over a step.
double read_ms(const Json& v, const std::string& path) {
  const double ms = read_non_negative_number(v, path);
  if (ms > kMaxTaskSeconds * kMsPerSecond) {
    fail(path, "expected at most " +
                   std::to_string(static_cast<std::int64_t>(kMaxTaskSeconds * kMsPerSecond)) +
                   " ms (a day, the limit of one task's time), got " + brief(v));
  }
  return ms;
}

// Per-stage milliseconds: a list of exactly `stages` entries, or one number for every stage.
std::vector<double> read_per_stage(const Json& v, const std::string& path, std::size_t stages,
                                   const std::string& why) {
  if (!v.is_array()) return std::vector<double>(stages, read_ms(v, path));
  if (v.size() != stages) {
    fail(path, "expected " + std::to_string(stages) + " entries (" + why + "), got " +
                   std::to_string(v.size()));
  }
  std::vector<double> ms;
  for (std::size_t i = 0; i < v.size(); ++i) {
    ms.push_back(read_ms(v[i], path + "[" + std::to_string(i) + "]"));
  }
  return ms;
}

std::vector<double> to_seconds(const std::vector<double>& ms) {
  std::vector<double> seconds;
  for (double value : ms) seconds.push_back(value / kMsPerSecond);
  return seconds;
}

void check_sum(const std::vector<double>& b, const std::vector<double>& i,
               const std::vector<double>& w, const std::string& path) {
  for (std::size_t s = 0; s < b.size(); ++s) {
    const double sum = i[s] + w[s];
    if (std::abs(b[s] - sum) > kSumTolerance * std::max(std::abs(b[s]), std::abs(sum))) {
      fail(path + "[" + std::to_string(s) + "]",
           "expected I + W = " + number_text(sum) + " (I " + number_text(i[s]) + " + W " +
               number_text(w[s]) + "), got " + number_text(b[s]));
    }
  }
}

// The number of stages: `given`, else the longest list's length (1 when every value is a number).
struct StageCount {
  std::size_t stages;
  std::string why;  // for "expected N entries (why)"
};

StageCount stage_count(std::optional<std::int64_t> given,
                       const std::vector<std::pair<const Json*, std::string>>& values) {
  if (given) return {std::size_t(*given), "one per stage"};
  std::size_t longest = 1;
  for (const auto& [v, path] : values) {
    if (v != nullptr) longest = std::max(longest, list_length(*v, path).value_or(1));
  }
  return {longest, "one per stage, as the longest list"};
}

StageCosts read_costs(const Json& root, std::optional<std::int64_t> given_stages,
                      const std::string& path, Diagnostics* diagnostics) {
  ObjectReader in(root, path, diagnostics);
  const Json& f = in.required("F");
  const Json* i = find_present(in, "I");
  const Json* w = find_present(in, "W");
  const Json* b = find_present(in, "B");
  const Json* p2p = find_present(in, "p2p");
  const std::string where = path.empty() ? "top level" : path;
  const StageCount count = stage_count(
      given_stages,
      {{&f, in.path_of("F")}, {i, in.path_of("I")}, {w, in.path_of("W")}, {b, in.path_of("B")}});
  const auto per_stage = [&](const Json* v, std::string_view key) {
    if (v == nullptr) return std::vector<double>();
    list_length(*v, in.path_of(key));  // rejects a non-number before reading
    return read_per_stage(*v, in.path_of(key), count.stages, count.why);
  };
  const std::vector<double> f_ms = per_stage(&f, "F");
  const std::vector<double> i_ms = per_stage(i, "I");
  const std::vector<double> w_ms = per_stage(w, "W");
  const std::vector<double> b_ms = per_stage(b, "B");
  // What is missing is reported after what is malformed: a bad value is the more specific error.
  if ((i == nullptr) != (w == nullptr)) {
    fail(where, std::string("expected \"I\" and \"W\" together, got only ") +
                    (i != nullptr ? "\"I\"" : "\"W\""));
  }
  if (b == nullptr && i == nullptr) {
    fail(where, "expected \"B\" or both \"I\" and \"W\", got neither");
  }
  if (b != nullptr && i != nullptr) check_sum(b_ms, i_ms, w_ms, in.path_of("B"));

  StageCosts costs;
  costs.forward = to_seconds(f_ms);
  costs.backward_input = to_seconds(i_ms);
  costs.backward_weight = to_seconds(w_ms);
  if (b != nullptr) {
    costs.backward = to_seconds(b_ms);
  } else {
    for (std::size_t s = 0; s < count.stages; ++s) {
      costs.backward.push_back(costs.backward_input[s] + costs.backward_weight[s]);
    }
  }
  if (p2p != nullptr) costs.p2p = read_ms(*p2p, in.path_of("p2p")) / kMsPerSecond;
  in.finish();
  return costs;
}

}  // namespace

StageCosts stage_costs_from_json(std::string_view text, const std::string& source,
                                 std::optional<std::int64_t> stages, const std::string& path,
                                 Diagnostics* diagnostics) {
  if (stages && *stages <= 0) {
    throw InvalidConfig(path + ": stages: expected a positive integer, got " +
                        std::to_string(*stages));
  }
  return detail::read_document(
      text, source, [&](const Json& root) { return read_costs(root, stages, path, diagnostics); });
}

std::string to_json(const StageCosts& costs) {
  std::vector<std::string> problems;
  const auto ms_list = [&](const char* key, const std::vector<double>& seconds) {
    Json list = Json::array();
    for (double value : seconds) {
      const double ms = value * kMsPerSecond;
      detail::check_non_negative(problems, key + ("[" + std::to_string(list.size()) + "]"), ms);
      list.push_back(ms);
    }
    return list;
  };
  Json out = {{"F", ms_list("F", costs.forward)}};
  if (costs.splits_backward()) {
    out["I"] = ms_list("I", costs.backward_input);
    out["W"] = ms_list("W", costs.backward_weight);
  }
  out["B"] = ms_list("B", costs.backward);
  out["p2p"] = costs.p2p * kMsPerSecond;
  detail::check_non_negative(problems, "p2p", costs.p2p * kMsPerSecond);
  detail::throw_if_problems("invalid costs", problems);
  return detail::dump_line(out, "costs");
}

}  // namespace metron::models
