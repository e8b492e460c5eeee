// Fuzzes the hardware reader (models::hardware_from_json, Note [hardware JSON]): an accepted spec's
// canonical JSON reads back to an equal spec and prints identically.

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "metron/base/diagnostics.h"
#include "metron/models/hardware_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace models = metron::models;
  using metron::fuzz::require;
  metron::Diagnostics diagnostics;
  const auto spec = metron::fuzz::accept([&] {
    return models::hardware_from_json(metron::fuzz::as_text(data, size), "hardware.json",
                                      &diagnostics);
  });
  if (!spec) return 0;
  const std::string json = models::to_json(*spec);
  const models::HardwareSpec back = models::hardware_from_json(json, "<canonical>");
  require(back == *spec, "hardware_from_json(to_json(s)) != s");
  require(models::to_json(back) == json, "to_json is not a fixed point");
  return 0;
}
