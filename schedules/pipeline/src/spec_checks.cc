#include "spec_checks.h"

#include <fmt/format.h>

#include "metron/base/error.h"

namespace metron::pipeline::detail {

std::string describe_spec(std::string_view name, const ScheduleSpec& spec) {
  return fmt::format("schedule \"{}\" (pp={}, vp={}, microbatches={})", name, spec.pp, spec.vp,
                     spec.microbatches);
}

void require_positive(std::string_view name, const ScheduleSpec& spec) {
  if (spec.pp < 1 || spec.vp < 1 || spec.microbatches < 1) {
    throw InvalidConfig(describe_spec(name, spec) + ": pp, vp and microbatches must be at least 1");
  }
}

void require_chunks(std::string_view name, const ScheduleSpec& spec, std::int32_t vp,
                    std::string_view hint) {
  if (spec.vp == vp) return;
  throw InvalidConfig(fmt::format("{}: needs exactly {} chunk{} per rank; got vp={}{}",
                                  describe_spec(name, spec), vp, vp == 1 ? "" : "s", spec.vp,
                                  hint));
}

}  // namespace metron::pipeline::detail
