// Fuzzes the configuration words `metron plan --compare-with` reads (plan/configuration_text.h)
// under the built-in plan request and one that lists the kernel options the other way round:
// any text must come back as a configuration or a typed input error, never as a crash; and what
// it accepts, written back as the plan's table writes it (describe(request, c)), reads back as
// the same configuration.

#include "metron/plan/configuration_text.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "metron/plan/plan_request.h"
#include "metron/plan/search_space.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace plan = metron::plan;
  static const plan::PlanRequest kPlain = plan::default_plan_request();
  static const plan::PlanRequest kListed = [] {
    plan::PlanRequest r = plan::default_plan_request();
    r.space.attention = {metron::models::AttentionKernel::kFused,
                         metron::models::AttentionKernel::kUnfused};
    r.space.fp8 = {metron::models::Fp8Recipe::kDelayed, metron::models::Fp8Recipe::kOff};
    r.space.tp_comm_overlap = {true, false};
    return r;
  }();
  const std::string_view text = metron::fuzz::as_text(data, size);
  for (const plan::PlanRequest* request : {&kPlain, &kListed}) {
    const auto candidate =
        metron::fuzz::accept([&] { return plan::parse_configuration(*request, text); });
    if (!candidate) continue;
    const auto again = metron::fuzz::accept(
        [&] { return plan::parse_configuration(*request, plan::describe(*request, *candidate)); });
    metron::fuzz::require(again.has_value() && *again == *candidate,
                          "configuration_text: an accepted configuration, described as the plan "
                          "writes it, does not read back as it");
  }
  return 0;
}
