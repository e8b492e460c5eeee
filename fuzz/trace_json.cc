// Fuzzes what reads Chrome traces: the trace checker (traces::check_chrome_trace, docs/TRACES.md
// §4.4) under Perfetto's rules and under HTA's, and the comparison's reader and side-by-side
// writer (traces/trace_comparison.h, `metron compare`): any text, malformed JSON included, must
// come back as a list of violations, figures or a typed input error, never as a crash.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "metron/traces/trace_checker.h"
#include "metron/traces/trace_comparison.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace traces = metron::traces;
  const std::string_view text = metron::fuzz::as_text(data, size);
  for (const bool hta : {false, true}) {
    (void)metron::fuzz::accept(
        [&] { return traces::check_chrome_trace(text, traces::TraceCheckOptions{.hta = hta}); });
  }
  if (const auto step = metron::fuzz::accept([&] { return traces::read_trace_step(text, "f"); })) {
    (void)metron::fuzz::accept([&] { return traces::compare_trace_steps(*step, *step, 3); });
    (void)metron::fuzz::accept([&] { return traces::side_by_side_trace(text, text); });
  }
  return 0;
}
