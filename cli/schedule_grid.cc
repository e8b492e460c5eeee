#include "schedule_grid.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "metron/pipeline/order_checks.h"

namespace metron::cli {
namespace {

// PyTorch's _schedule_visualizer widths, so our grid and its pictures line up.
constexpr pipeline::ActionTimes kVisualTimes{
    .forward = 1, .backward_input = 1, .backward_weight = 1, .backward = 2, .overlap = 3};

}  // namespace

std::string render_grid(const pipeline::Order& order) {
  const pipeline::Timeline t = pipeline::time_order(order, kVisualTimes);
  const auto steps = static_cast<std::size_t>(std::lround(t.makespan));
  const std::size_t ranks = order.rows.size();
  std::vector<std::vector<std::string>> cells(steps, std::vector<std::string>(ranks, "."));
  std::size_t width = 6;
  for (std::size_t r = 0; r < ranks; ++r) {
    for (std::size_t k = 0; k < order.rows[r].size(); ++k) {
      if (!order.rows[r][k]) continue;
      const auto first = static_cast<std::size_t>(std::lround(t.start[r][k]));
      const auto last = static_cast<std::size_t>(std::lround(t.end[r][k]));
      const std::string token = ir::to_string(*order.rows[r][k]);
      width = std::max(width, token.size());
      for (std::size_t s = first; s < last && s < steps; ++s)
        cells[s][r] = s == first ? token : "|";
    }
  }
  std::string out = "step";
  for (std::size_t r = 0; r < ranks; ++r)
    out += fmt::format("  {:<{}}", fmt::format("rank {}", r), width);
  out += "\n";
  for (std::size_t s = 0; s < steps; ++s) {
    out += fmt::format("{:>4}", s);
    for (const auto& cell : cells[s]) out += fmt::format("  {:<{}}", cell, width);
    while (!out.empty() && out.back() == ' ') out.pop_back();
    out += "\n";
  }
  return out;
}

}  // namespace metron::cli
