// placeholder: being written (every function throws until its owner replaces this file)
#include "metron/base/error.h"
#include "metron/schedules/generators.h"
#include "metron/schedules/lowering.h"
#include "metron/schedules/order_checks.h"
namespace metron::schedules {
std::vector<ir::LayerRange> assign_layers(const LayerAssignment&, std::int32_t) { throw InvalidConfig("not implemented yet"); }
ir::Graph assign_layers(const ir::Graph&, const std::vector<ir::LayerRange>&) { throw InvalidConfig("not implemented yet"); }
}  // namespace metron::schedules
