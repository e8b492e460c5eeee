// placeholder: being written (every function throws until its owner replaces this file)
#include "metron/base/error.h"
#include "metron/schedules/generators.h"
#include "metron/schedules/lowering.h"
#include "metron/schedules/order_checks.h"
namespace metron::schedules {
ir::Graph add_memory_effects(const ir::Graph&, const LoweringOptions&) { throw InvalidConfig("not implemented yet"); }
}  // namespace metron::schedules
