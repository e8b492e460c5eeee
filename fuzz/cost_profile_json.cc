// Fuzzes the measured-cost profile reader (models::cost_profile_from_json, Note [profile JSON]):
// an accepted profile's canonical JSON reads back to an equal profile (exactly: the header
// promises it for every profile read from JSON) and prints identically.

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "metron/base/diagnostics.h"
#include "metron/models/cost_profile.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace models = metron::models;
  using metron::fuzz::require;
  metron::Diagnostics diagnostics;
  const auto profile = metron::fuzz::accept([&] {
    return models::cost_profile_from_json(metron::fuzz::as_text(data, size), "profile.json",
                                          &diagnostics);
  });
  if (!profile) return 0;
  const std::string json = models::to_json(*profile);
  const models::CostProfile back = models::cost_profile_from_json(json, "<canonical>");
  require(back == *profile, "cost_profile_from_json(to_json(p)) != p");
  require(models::to_json(back) == json, "to_json is not a fixed point");
  return 0;
}
