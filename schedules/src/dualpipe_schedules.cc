// placeholder: being written (every function throws until its owner replaces this file)
#include "metron/base/error.h"
#include "metron/schedules/generators.h"
#include "metron/schedules/lowering.h"
#include "metron/schedules/order_checks.h"
namespace metron::schedules {
Order dualpipe(const ScheduleSpec&) { throw InvalidConfig("not implemented yet"); }
Order dualpipe_v(const ScheduleSpec&) { throw InvalidConfig("not implemented yet"); }
}  // namespace metron::schedules
