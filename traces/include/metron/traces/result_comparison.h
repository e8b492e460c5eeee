#pragma once
// Predicted against measured from two result JSONs (`metron compare` given what `simulate --json`
// and `run --json` write, scenario/evaluation.h): the step's iteration time, bubble and exposed
// communication, and each rank's compute, idle, communication, bubbles by cause and peak memory,
// side by side with the error, (predicted − measured) / measured as for traces
// (trace_comparison.h). The reader checks what it reads (issue 14): a result is an object whose
// figures are numbers in their range, named by their JSON path when they are not.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace metron::traces {

/// One rank of a result JSON ("per_rank"), times in milliseconds.
struct ResultRank {
  double compute_ms = 0;
  double idle_ms = 0;
  double comm_ms = 0;
  double comm_exposed_ms = 0;
  double comm_overlapped_ms = 0;
  std::map<std::string, double> bubble_ms;  ///< by cause ("warmup", "wait_recv", ...)
  double peak_memory_bytes = 0;
};

/// What compare reads of a result JSON.
struct ResultFigures {
  double iteration_time_ms = 0;
  double bubble_fraction = 0;        ///< 0 to 1
  double exposed_comm_fraction = 0;  ///< 0 to 1
  std::vector<ResultRank> ranks;
};

/// The longest time a result may hold, in milliseconds: what the simulator's int64 nanoseconds
/// reach (2^63 ns, about 292 years). Larger values are not a step of any run.
inline constexpr double kMaxResultMs = 9.2233720368547758e12;

/// Reads the figures of a result JSON's text. Throws ParseError naming `source` for malformed
/// JSON, and InvalidConfig "<source>: <path>: expected ..." for a document that is no result: not
/// an object, a missing figure, a figure that is no number or outside its range (times 0 to
/// kMaxResultMs, fractions 0 to 1, bytes 0 to 2^63), per_rank not a non-empty array of objects,
/// bubble_ms not an object of times.
ResultFigures read_result_figures(std::string_view text, const std::string& source);

/// The text report of two results of one step: the step's three figures and each rank's seven
/// (bubbles by the causes either names), predicted, measured and the error. Throws InvalidConfig
/// when the two have different numbers of ranks (not results of one step).
std::string compare_result_figures(const ResultFigures& predicted, const ResultFigures& measured);

}  // namespace metron::traces
