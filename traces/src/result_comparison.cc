#include "metron/traces/result_comparison.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "metron/base/error.h"
#include "metron/base/json_parse.h"
#include "trace_values.h"

namespace metron::traces {
namespace {

using detail::Json;

constexpr double kMaxBytes = 9.2233720368547758e18;  // 2^63
constexpr std::size_t kMaxCauseLength = 64;

/// Reads one result document, naming the place of whatever is wrong.
class ResultReader {
 public:
  explicit ResultReader(const std::string& source) : source_(source) {}

  [[noreturn]] void fail(const std::string& path, const std::string& expected) const {
    throw InvalidConfig(source_ + ": " + path + ": expected " + expected);
  }

  /// The number at `key` of `object` (found at `path`), in [0, most].
  double number(const Json& object, const std::string& path, const char* key, double most,
                const char* unit) const {
    const std::string at = path.empty() ? key : path + "." + key;
    const Json* value = detail::member(object, key);
    const std::string range = fmt::format("a number from 0 to {:g}{}", most, unit);
    if (value == nullptr) fail(at, range + ", got nothing (the key is missing)");
    if (!value->is_number()) fail(at, range + ", got " + std::string(value->type_name()));
    const double v = value->get<double>();
    if (!(v >= 0 && v <= most)) fail(at, range + fmt::format(", got {:g}", v));
    return v;
  }

  double time(const Json& object, const std::string& path, const char* key) const {
    return number(object, path, key, kMaxResultMs, " ms");
  }

  ResultRank rank(const Json& r, const std::string& path) const {
    if (!r.is_object()) fail(path, "an object of the rank's figures, got " + type_of(r));
    ResultRank out{.compute_ms = time(r, path, "compute_ms"),
                   .idle_ms = time(r, path, "idle_ms"),
                   .comm_ms = time(r, path, "comm_ms"),
                   .comm_exposed_ms = time(r, path, "comm_exposed_ms"),
                   .comm_overlapped_ms = time(r, path, "comm_overlapped_ms"),
                   .peak_memory_bytes = number(r, path, "peak_memory_bytes", kMaxBytes, " bytes")};
    const Json* bubbles = detail::member(r, "bubble_ms");
    if (bubbles == nullptr) fail(path + ".bubble_ms", "an object of times by cause, got nothing");
    if (!bubbles->is_object()) {
      fail(path + ".bubble_ms", "an object of times by cause, got " + type_of(*bubbles));
    }
    for (auto it = bubbles->begin(); it != bubbles->end(); ++it) {
      // Causes are names (sim's BubbleCause: "warmup", "wait_recv", ...), printed as rows.
      const std::string& cause = it.key();
      const bool name = !cause.empty() && cause.size() <= kMaxCauseLength &&
                        std::all_of(cause.begin(), cause.end(), [](char c) {
                          return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
                        });
      if (!name) {
        fail(path + ".bubble_ms",
             fmt::format("causes named by letters, digits and _ (at most {}), got a key of {} "
                         "bytes that is none",
                         kMaxCauseLength, cause.size()));
      }
      out.bubble_ms[cause] = time(*bubbles, path + ".bubble_ms", cause.c_str());
    }
    return out;
  }

  ResultFigures figures(const Json& doc) const {
    if (!doc.is_object()) fail("top level", "a result JSON object, got " + type_of(doc));
    ResultFigures out{.iteration_time_ms = time(doc, "", "iteration_time_ms"),
                      .bubble_fraction = number(doc, "", "bubble_fraction", 1, ""),
                      .exposed_comm_fraction = number(doc, "", "exposed_comm_fraction", 1, "")};
    const Json* ranks = detail::member(doc, "per_rank");
    if (ranks == nullptr || !ranks->is_array() || ranks->empty()) {
      fail("per_rank", "a non-empty array of the ranks' figures, got " +
                           (ranks == nullptr ? std::string("nothing") : type_of(*ranks)));
    }
    for (std::size_t r = 0; r < ranks->size(); ++r) {
      out.ranks.push_back(rank((*ranks)[r], fmt::format("per_rank[{}]", r)));
    }
    return out;
  }

 private:
  static std::string type_of(const Json& value) {
    if (value.is_array()) return value.empty() ? "an empty array" : "an array";
    return value.type_name();
  }

  const std::string& source_;
};

std::string error_text(double predicted, double measured) {
  return measured == 0 ? "" : fmt::format("{:+.1f}%", 100 * (predicted - measured) / measured);
}

}  // namespace

ResultFigures read_result_figures(std::string_view text, const std::string& source) {
  return ResultReader(source).figures(parse_json_document<Json>(text, source));
}

std::string compare_result_figures(const ResultFigures& predicted, const ResultFigures& measured) {
  if (predicted.ranks.size() != measured.ranks.size()) {
    throw InvalidConfig(fmt::format(
        "the results have {} and {} ranks; expected two results of one step (compare `simulate "
        "--full --json` with `run --json`)",
        predicted.ranks.size(), measured.ranks.size()));
  }
  std::string out =
      fmt::format("{:<28} {:>14} {:>14} {:>9}\n", "", "predicted", "measured", "error");
  const auto row = [&out](const std::string& what, double p, double m, const char* unit) {
    out += fmt::format("{:<28} {:>11.3f} {:>2} {:>11.3f} {:>2} {:>9}\n", what, p, unit, m, unit,
                       error_text(p, m));
  };
  row("iteration time", predicted.iteration_time_ms, measured.iteration_time_ms, "ms");
  row("bubble fraction", 100 * predicted.bubble_fraction, 100 * measured.bubble_fraction, "%");
  row("exposed communication", 100 * predicted.exposed_comm_fraction,
      100 * measured.exposed_comm_fraction, "%");
  for (std::size_t r = 0; r < predicted.ranks.size(); ++r) {
    const ResultRank& p = predicted.ranks[r];
    const ResultRank& m = measured.ranks[r];
    out += fmt::format("rank {}\n", r);
    row("  compute", p.compute_ms, m.compute_ms, "ms");
    row("  idle", p.idle_ms, m.idle_ms, "ms");
    std::map<std::string, std::pair<double, double>> bubbles;
    for (const auto& [cause, ms] : p.bubble_ms) bubbles[cause].first = ms;
    for (const auto& [cause, ms] : m.bubble_ms) bubbles[cause].second = ms;
    for (const auto& [cause, both] : bubbles) {
      row("  bubble " + cause, both.first, both.second, "ms");
    }
    row("  communication", p.comm_ms, m.comm_ms, "ms");
    row("    exposed", p.comm_exposed_ms, m.comm_exposed_ms, "ms");
    row("    overlapped", p.comm_overlapped_ms, m.comm_overlapped_ms, "ms");
    row("  peak memory", p.peak_memory_bytes / 1e6, m.peak_memory_bytes / 1e6, "MB");
  }
  return out;
}

}  // namespace metron::traces
