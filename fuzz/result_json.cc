// Fuzzes what `metron compare` reads of two result JSONs (traces/result_comparison.h): any text,
// malformed JSON included, must come back as the figures (every one a finite number in its
// range) or a typed input error, and two accepted results as a report or a typed error, never as
// a crash.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "metron/traces/result_comparison.h"

namespace {

bool in_range(double v, double most) { return std::isfinite(v) && v >= 0 && v <= most; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace traces = metron::traces;
  const std::string_view text = metron::fuzz::as_text(data, size);
  const auto figures = metron::fuzz::accept([&] { return traces::read_result_figures(text, "f"); });
  if (!figures) return 0;
  // The reader's promise: what it accepts is in range, so that no report prints garbage.
  metron::fuzz::require(in_range(figures->iteration_time_ms, traces::kMaxResultMs) &&
                            in_range(figures->bubble_fraction, 1) &&
                            in_range(figures->exposed_comm_fraction, 1) && !figures->ranks.empty(),
                        "result_json: an accepted result holds a figure out of its range");
  for (const traces::ResultRank& r : figures->ranks) {
    for (const double ms :
         {r.compute_ms, r.idle_ms, r.comm_ms, r.comm_exposed_ms, r.comm_overlapped_ms}) {
      metron::fuzz::require(in_range(ms, traces::kMaxResultMs),
                            "result_json: an accepted rank holds a time out of its range");
    }
    for (const auto& [cause, ms] : r.bubble_ms) {
      metron::fuzz::require(in_range(ms, traces::kMaxResultMs) && !cause.empty(),
                            "result_json: an accepted bubble is out of its range");
    }
  }
  (void)metron::fuzz::accept([&] { return traces::compare_result_figures(*figures, *figures); });
  return 0;
}
