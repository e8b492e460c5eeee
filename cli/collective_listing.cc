#include "collective_listing.h"

#include <fmt/format.h>

#include <variant>

namespace metron::cli {
namespace {

std::string tag(std::int32_t value) { return value >= 0 ? std::to_string(value) : "-"; }

}  // namespace

std::string collective_listing(const ir::Graph& graph) {
  std::string out;
  for (std::int32_t r = 0; r < graph.num_ranks(); ++r) {
    const ir::RankId rank{r};
    out += fmt::format("rank {}:\n", r);
    out +=
        fmt::format("  {:>6}  {:<15} {:<12} {:>14} {:<5} {:>6} {:>5} {:>4}  {:<10} {}\n", "issue",
                    "op", "group", "bytes", "dtype", "bucket", "chunk", "mb", "stream", "trigger");
    std::int32_t position = 0;
    for (ir::TaskId t : graph.issue_order(rank)) {
      const ir::Task& task = graph.task(t);
      ++position;
      if (const auto* c = std::get_if<ir::Collective>(&task.op)) {
        std::string op(ir::to_string(c->op));
        if (c->count > 1) op += fmt::format(" x{}", c->count);
        if (c->root.valid()) op += fmt::format(" @{}", c->root.value());
        out +=
            fmt::format("  {:>6}  {:<15} {:<12} {:>14} {:<5} {:>6} {:>5} {:>4}  {:<10} {}\n",
                        position, op, graph.group(c->group).name, c->bytes, ir::to_string(c->dtype),
                        tag(task.bucket.value()), tag(task.chunk.value()),
                        tag(task.microbatch.value()), graph.stream(task.stream).name, task.label);
      } else if (const auto* w = std::get_if<ir::HostWait>(&task.op)) {
        out += fmt::format("  {:>6}  {:<15} {:<12} {:>14} {:<5} {:>6} {:>5} {:>4}  {:<10} {}\n",
                           position, "host-wait", "-", "-", "-", "-", "-", "-", "host",
                           task.label.empty() ? graph.describe(w->target) : task.label);
      }
    }
  }
  return out;
}

}  // namespace metron::cli
