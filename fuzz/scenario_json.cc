// Fuzzes the scenario reader (scenario::scenario_from_json, Note [scenario JSON]), which also
// drives the model, hardware, parallel and costs readers: an accepted scenario's canonical JSON
// reads back to an equal scenario (its explicit costs up to the rounding of the millisecond
// conversion, as in tests/scenario/scenario_test.cc), and validate() either passes or rejects
// it as bad input.

#include <cstddef>
#include <cstdint>
#include <string>

#include "costs_close.h"
#include "fuzz_support.h"
#include "metron/scenario/scenario.h"

namespace {

namespace scenario = metron::scenario;

bool same_up_to_cost_rounding(scenario::Scenario a, scenario::Scenario b) {
  if (a.costs.has_value() != b.costs.has_value()) return false;
  if (a.costs && !metron::fuzz::close(*a.costs, *b.costs)) return false;
  a.costs.reset();
  b.costs.reset();
  return a == b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using metron::fuzz::require;
  const auto s = metron::fuzz::accept(
      [&] { return scenario::scenario_from_json(metron::fuzz::as_text(data, size), "s.json"); });
  if (!s) return 0;
  const std::string json = scenario::to_json(*s);
  const scenario::Scenario back = scenario::scenario_from_json(json, "<canonical>");
  require(same_up_to_cost_rounding(back, *s), "scenario_from_json(to_json(s)) != s");
  (void)metron::fuzz::accept([&] {
    scenario::validate(*s);
    return true;
  });
  return 0;
}
