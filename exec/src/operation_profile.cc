#include "metron/exec/operation_profile.h"

#include <algorithm>
#include <optional>
#include <set>
#include <variant>

#include "metron/models/compute_cost.h"

namespace metron::exec {

std::string profile_key(const ir::Operation& op) {
  models::OpCost cost{.name = op.name, .m = op.m, .n = op.n, .k = op.k, .batch = op.batch};
  if (op.kind == ir::OperationKind::kGemm) cost.kind = models::OpKind::kGemm;
  if (op.kind == ir::OperationKind::kBatchedGemm) cost.kind = models::OpKind::kBatchedGemm;
  return cost.profile_key();
}

std::vector<std::vector<std::vector<ProfiledOperation>>> distinct_task_operations(
    const ir::Graph& graph) {
  std::vector<std::vector<std::vector<ProfiledOperation>>> out(
      static_cast<std::size_t>(graph.num_ranks()));
  for (std::int32_t r = 0; r < graph.num_ranks(); ++r) {
    std::set<std::vector<std::pair<std::string, std::int32_t>>> seen;  // (key, count) per op
    for (const ir::TaskId id : graph.issue_order(ir::RankId{r})) {
      const auto* compute = std::get_if<ir::Compute>(&graph.task(id).op);
      if (compute == nullptr) continue;
      std::vector<ProfiledOperation> ops;
      std::vector<std::pair<std::string, std::int32_t>> signature;
      for (const ir::Operation& op : compute->operations) {
        const std::optional<models::Precision> precision =
            models::parse_precision(ir::to_string(op.dtype));
        if (!precision) continue;  // integer data is never a priced op
        ops.push_back({{profile_key(op), *precision}, op});
        signature.emplace_back(
            ops.back().key.first + ":" + std::string(models::to_string(*precision)), op.count);
      }
      if (!ops.empty() && seen.insert(std::move(signature)).second) {
        out[static_cast<std::size_t>(r)].push_back(std::move(ops));
      }
    }
  }
  return out;
}

double median_seconds(std::vector<double> seconds) {
  if (seconds.empty()) return 0;
  const auto middle = seconds.begin() + static_cast<std::ptrdiff_t>(seconds.size() / 2);
  std::nth_element(seconds.begin(), middle, seconds.end());
  return *middle;
}

}  // namespace metron::exec
