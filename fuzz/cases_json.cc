// Fuzzes the published-cases reader (validation::cases_from_json, Note [published cases]), which
// also drives the scenario reader for each case: any text is read or rejected as bad input, and
// an accepted case has either a scenario or the reason it has none.

#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "metron/validation/published_case.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using metron::fuzz::require;
  const auto cases = metron::fuzz::accept([&] {
    return metron::validation::cases_from_json(metron::fuzz::as_text(data, size), "cases.json");
  });
  if (!cases) return 0;
  for (const auto& c : *cases) {
    require(c.scenario.has_value() != !c.unsupported.empty(),
            "a case has both a scenario and a reason, or neither");
  }
  return 0;
}
