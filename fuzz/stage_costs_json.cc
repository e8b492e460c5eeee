// Fuzzes the explicit per-stage costs reader (models::stage_costs_from_json, Note [costs JSON]):
// an accepted costs object's canonical JSON reads back (B given with I and W must still equal
// I + W) to the same times up to the rounding of the unit conversion.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "costs_close.h"
#include "fuzz_support.h"
#include "metron/base/diagnostics.h"
#include "metron/models/stage_costs.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace models = metron::models;
  using metron::fuzz::require;
  metron::Diagnostics diagnostics;
  const auto costs = metron::fuzz::accept([&] {
    return models::stage_costs_from_json(metron::fuzz::as_text(data, size), "costs.json",
                                         std::nullopt, "costs", &diagnostics);
  });
  if (!costs) return 0;
  const std::string json = models::to_json(*costs);
  const models::StageCosts back =
      models::stage_costs_from_json(json, "<canonical>", costs->stages());
  require(metron::fuzz::close(back, *costs), "stage_costs_from_json(to_json(c)) differs from c");
  return 0;
}
