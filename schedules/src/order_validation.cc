// placeholder: being written (every function throws until its owner replaces this file)
#include "metron/base/error.h"
#include "metron/schedules/generators.h"
#include "metron/schedules/lowering.h"
#include "metron/schedules/order_checks.h"
namespace metron::schedules {
StageMicrobatches stage_microbatches(Placement, std::int32_t, std::int32_t, std::int32_t) { throw InvalidConfig("not implemented yet"); }
void validate_order(const Order&, const ScheduleSpec&, Placement) { throw InvalidConfig("not implemented yet"); }
}  // namespace metron::schedules
