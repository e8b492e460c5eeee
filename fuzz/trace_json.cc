// Fuzzes the Chrome trace checker (traces::check_chrome_trace, docs/TRACES.md §4.4) under
// Perfetto's rules and under HTA's: any text, malformed JSON included, must come back as a list
// of violations, never as a crash.

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "metron/traces/trace_checker.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace traces = metron::traces;
  const std::string_view text = metron::fuzz::as_text(data, size);
  for (const bool hta : {false, true}) {
    (void)metron::fuzz::accept(
        [&] { return traces::check_chrome_trace(text, traces::TraceCheckOptions{.hta = hta}); });
  }
  return 0;
}
