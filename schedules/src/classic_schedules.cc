// placeholder: being written (every function throws until its owner replaces this file)
#include "metron/base/error.h"
#include "metron/schedules/generators.h"
#include "metron/schedules/lowering.h"
#include "metron/schedules/order_checks.h"
namespace metron::schedules {
Order no_pipelining(const ScheduleSpec&) { throw InvalidConfig("not implemented yet"); }
Order gpipe(const ScheduleSpec&) { throw InvalidConfig("not implemented yet"); }
Order looped_bfs(const ScheduleSpec&) { throw InvalidConfig("not implemented yet"); }
}  // namespace metron::schedules
