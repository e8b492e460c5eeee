// CommModel: alpha–beta times of collectives and transfers (Note [collective costs]).

#include "metron/models/comm_cost.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "metron/base/error.h"
#include "nccl_protocols.h"
#include "spec_checks.h"

namespace metron::models {
namespace {

constexpr detail::EnumNames<CommAlgorithm, 3> kAlgorithmNames{{
    {CommAlgorithm::kAuto, "auto"},
    {CommAlgorithm::kRing, "ring"},
    {CommAlgorithm::kTree, "tree"},
}};

// ⌈log₂ n⌉ for n >= 1: the depth of a binary tree over n ranks.
double ceil_log2(std::int64_t n) {
  double depth = 0;
  for (std::int64_t reach = 1; reach < n; reach *= 2) ++depth;
  return depth;
}

double ring_time(CommOp op, double bytes, double n, const Link& link) {
  const double a = link.latency;
  const double s = bytes / link.bandwidth_at(bytes);
  switch (op) {
    case CommOp::kAllReduce:
      return 2 * (n - 1) * a + 2 * (n - 1) / n * s;
    case CommOp::kReduceScatter:
    case CommOp::kAllGather:
    case CommOp::kAllToAll:
      return (n - 1) * a + (n - 1) / n * s;
    case CommOp::kBroadcast:
    case CommOp::kReduce:
      return (n - 1) * a + s;
  }
  return 0;
}

double tree_all_reduce_time(double bytes, std::int64_t n, const Link& link) {
  return 2 * ceil_log2(n) * link.latency + 2 * bytes / link.bandwidth_at(bytes);
}

void check_link(std::vector<std::string>& problems, const std::string& name, const Link& link) {
  detail::check_positive(problems, name + ".bandwidth", link.bandwidth);
  detail::check_non_negative(problems, name + ".latency", link.latency);
}

bool link_ok(const Link& link) {
  return std::isfinite(link.bandwidth) && link.bandwidth > 0 && std::isfinite(link.latency) &&
         link.latency >= 0;
}

void check_bytes(std::vector<std::string>& problems, std::int64_t bytes) {
  if (bytes < 0) {
    problems.push_back("bytes: expected an integer >= 0, got " + std::to_string(bytes));
  }
}

// nccl-tests' PERFORMANCE.md: the multiple of S a ring moves over each rank's link, which makes
// busbw comparable to the link's bandwidth whatever the rank count.
double bus_factor(CommOp op, double n) {
  switch (op) {
    case CommOp::kAllReduce:
      return 2 * (n - 1) / n;
    case CommOp::kReduceScatter:
    case CommOp::kAllGather:
    case CommOp::kAllToAll:
      return (n - 1) / n;
    case CommOp::kBroadcast:
    case CommOp::kReduce:
      return 1;
  }
  return 1;
}

std::string op_where(CommOp op) { return "collective " + std::string(to_string(op)); }

// The simulator prices every collective task through here, so the valid case builds no strings.
void check_flat(CommOp op, std::int64_t bytes, std::int64_t ranks, const Link& link) {
  if (bytes >= 0 && ranks >= 1 && link_ok(link)) return;
  std::vector<std::string> problems;
  check_bytes(problems, bytes);
  detail::check_positive(problems, "ranks", ranks);
  check_link(problems, "link", link);
  detail::throw_if_problems(op_where(op), problems);
}

void check_group(CommOp op, std::int64_t bytes, GroupPlacement group) {
  if (bytes >= 0 && group.nodes >= 1 && group.nodes <= group.ranks) return;
  std::vector<std::string> problems;
  check_bytes(problems, bytes);
  detail::check_positive(problems, "ranks", group.ranks);
  detail::check_positive(problems, "nodes", group.nodes);
  if (group.nodes > group.ranks && group.ranks > 0) {
    problems.push_back("nodes: expected at most ranks (" + std::to_string(group.ranks) + "), got " +
                       std::to_string(group.nodes));
  }
  detail::throw_if_problems(op_where(op), problems);
}

// Prices one phase on the link it runs over.
struct PhaseMaker {
  Link intra;
  Link inter;
  CommAlgorithm algorithm;

  CommPhase operator()(CommOp op, std::int64_t bytes, std::int64_t ranks, bool inter_node) const {
    return {
        .op = op,
        .bytes = bytes,
        .ranks = ranks,
        .inter_node = inter_node,
        .seconds = flat_collective_time(op, bytes, ranks, inter_node ? inter : intra, algorithm)};
  }
};

// Note [collective costs], multi-node part without NCCL's protocol model (no
// inter_node.nccl_host_cpu), for r > 1 ranks on each of N > 1 nodes, the ring's rate B given. A
// group whose ranks do not split evenly over its nodes (group_placement() never makes one) is
// priced as if every node held ranks_per_node(), rounded down: the ranks beyond that are
// ignored, a bounded underestimate rather than an error.
double multi_node_ring_time(CommOp op, double bytes, GroupPlacement group, const Link& intra,
                            const Link& inter, double rate) {
  const detail::RingSteps ring = detail::ring_steps(op, group.ranks_per_node(), group.nodes);
  return (ring.steps - ring.inter_steps) * intra.latency + ring.inter_steps * inter.latency +
         ring.byte_share * bytes / rate;
}

double multi_node_tree_all_reduce_time(double bytes, GroupPlacement group, const Link& intra,
                                       const Link& inter, double rate) {
  const double r = double(group.ranks_per_node());
  return 2 * ((r - 1) * intra.latency + ceil_log2(group.nodes) * inter.latency) + 2 * bytes / rate;
}

// All-to-all is no ring in NCCL (each rank sends to each peer): each rank sends S/n to each of
// its n peers. Inside: an all-to-all of r ranks sending r·S/n each moves (r−1)/r · r·S/n =
// (r−1)/n · S over the intra link. Across: an all-to-all of N "nodes" of S moves (N−1)/N · S =
// (n−r)/n · S (as n = r·N) over the NICs, with one latency per peer node.
std::vector<CommPhase> all_to_all_phases(const PhaseMaker& phase, std::int64_t bytes,
                                         GroupPlacement group) {
  const std::int64_t r = group.ranks_per_node();
  return {phase(CommOp::kAllToAll, bytes * r / group.ranks, r, false),
          phase(CommOp::kAllToAll, bytes, group.nodes, true)};
}

}  // namespace

std::string_view to_string(CommAlgorithm algorithm) noexcept {
  return detail::name_of(kAlgorithmNames, algorithm);
}

std::optional<CommAlgorithm> parse_comm_algorithm(std::string_view name) noexcept {
  return detail::parse_name(kAlgorithmNames, name);
}

double flat_collective_time(CommOp op, std::int64_t bytes, std::int64_t ranks, const Link& link,
                            CommAlgorithm algorithm) {
  check_flat(op, bytes, ranks, link);
  if (ranks == 1 || bytes == 0) return 0;

  const double ring = ring_time(op, double(bytes), double(ranks), link);
  // NCCL has trees for all-reduce only; every other op runs as a ring whatever was asked.
  if (op != CommOp::kAllReduce || algorithm == CommAlgorithm::kRing) return ring;
  const double tree = tree_all_reduce_time(double(bytes), ranks, link);
  return algorithm == CommAlgorithm::kTree ? tree : std::min(ring, tree);
}

CommModel::CommModel(HardwareSpec hardware, const CostProfile* profile, CommAlgorithm algorithm)
    : hardware_(std::move(hardware)), profile_(profile), algorithm_(algorithm) {
  // Only the fabrics matter here, so a spec with just those filled in is enough.
  std::vector<std::string> problems;
  check_link(problems, "intra_node", intra_node());
  check_link(problems, "inter_node", inter_node());
  detail::throw_if_problems("invalid hardware \"" + hardware_.name + "\"", problems);
}

Link CommModel::intra_node() const {
  const IntraNodeFabric& f = hardware_.intra_node;
  return {.latency = f.latency,
          .bandwidth = f.bandwidth,
          .size_efficiency = f.size_efficiency ? &*f.size_efficiency : nullptr};
}

Link CommModel::inter_node() const {
  const InterNodeNetwork& n = hardware_.inter_node;
  return {.latency = n.latency,
          .bandwidth = n.bandwidth,
          .size_efficiency = n.size_efficiency ? &*n.size_efficiency : nullptr};
}

std::vector<CommPhase> CommModel::phases(CommOp op, std::int64_t bytes,
                                         GroupPlacement group) const {
  check_group(op, bytes, group);
  if (group.ranks == 1 || bytes == 0) return {};

  const PhaseMaker phase{intra_node(), inter_node(), algorithm_};
  if (group.nodes == 1) return {phase(op, bytes, group.ranks, false)};
  const std::string& host_cpu = hardware_.inter_node.nccl_host_cpu;
  const std::int64_t r = group.ranks_per_node();
  if (op == CommOp::kAllToAll) {
    if (r == 1) return {phase(op, bytes, group.nodes, true)};
    return all_to_all_phases(phase, bytes, group);
  }
  if (host_cpu.empty() && r == 1) return {phase(op, bytes, group.nodes, true)};
  // One ring (or, for an all-reduce, a tree) through every rank (Note [collective costs]).
  const double size = double(bytes);
  const double rate =
      r == 1 ? phase.inter.bandwidth_at(size)
             : std::min(phase.intra.bandwidth_at(size), double(r) * phase.inter.bandwidth_at(size));
  const detail::NcclGroup nccl{
      .ranks_per_node = r, .nodes = group.nodes, .rate = rate, .amd_host = host_cpu == "amd"};
  const double ring = host_cpu.empty()
                          ? multi_node_ring_time(op, size, group, phase.intra, phase.inter, rate)
                          : detail::nccl_ring_time(op, size, nccl);
  double seconds = ring;
  if (op == CommOp::kAllReduce && algorithm_ != CommAlgorithm::kRing) {
    const double tree = host_cpu.empty() ? multi_node_tree_all_reduce_time(size, group, phase.intra,
                                                                           phase.inter, rate)
                                         : detail::nccl_tree_all_reduce_time(size, nccl);
    seconds = algorithm_ == CommAlgorithm::kTree ? tree : std::min(ring, tree);
  }
  return {
      {.op = op, .bytes = bytes, .ranks = r * group.nodes, .inter_node = true, .seconds = seconds}};
}

double CommModel::collective_time(CommOp op, std::int64_t bytes, GroupPlacement group) const {
  if (profile_ != nullptr) {
    if (const std::optional<double> measured = profile_->collective(op, group, bytes)) {
      return *measured;
    }
  }
  double seconds = 0;
  for (const CommPhase& phase : phases(op, bytes, group)) seconds += phase.seconds;
  return seconds;
}

double CommModel::p2p_time(std::int64_t bytes, bool same_node) const {
  if (profile_ != nullptr) {
    if (const std::optional<double> measured = profile_->p2p(bytes, same_node)) return *measured;
  }
  if (bytes < 0) {
    throw InvalidConfig("p2p: bytes: expected an integer >= 0, got " + std::to_string(bytes));
  }
  if (bytes == 0) return 0;
  const Link link = same_node ? intra_node() : inter_node();
  return link.latency + double(bytes) / link.bandwidth_at(double(bytes));
}

Link fit_ring_link(CommOp op, std::int64_t ranks, const std::vector<CommSample>& samples) {
  const std::string where = "link fit of " + std::string(to_string(op));
  std::vector<std::string> problems;
  if (ranks < 2) problems.push_back("ranks: expected at least 2, got " + std::to_string(ranks));
  std::set<std::int64_t> sizes;
  for (std::size_t i = 0; i < samples.size(); ++i) {
    const std::string at = "samples[" + std::to_string(i) + "]";
    check_bytes(problems, samples[i].bytes);
    detail::check_positive(problems, at + ".seconds", samples[i].seconds);
    sizes.insert(samples[i].bytes);
  }
  if (sizes.size() < 2) {
    problems.push_back("samples: expected at least 2 distinct sizes, got " +
                       std::to_string(sizes.size()));
  }
  detail::throw_if_problems(where, problems);
  // t = a·α + b·S·(1/β): the ring's coefficients, read off the formula itself.
  const double n = static_cast<double>(ranks);
  const double a = ring_time(op, 0, n, {.latency = 1, .bandwidth = 1});
  const double b = ring_time(op, 1, n, {.latency = 0, .bandwidth = 1});
  // Weighted least squares in x = α, y = 1/β with weights 1/t², by the normal equations.
  struct Sums {
    double aa = 0, ab = 0, bb = 0, at = 0, bt = 0;  // Σ w·a·a, Σ w·a·bS, Σ w·bS·bS, Σ w·a·t, ...
  } sum;
  for (const CommSample& sample : samples) {
    const double w = 1 / (sample.seconds * sample.seconds);
    const double cb = b * static_cast<double>(sample.bytes);
    sum.aa += w * a * a;
    sum.ab += w * a * cb;
    sum.bb += w * cb * cb;
    sum.at += w * a * sample.seconds;
    sum.bt += w * cb * sample.seconds;
  }
  const double det = sum.aa * sum.bb - sum.ab * sum.ab;
  double alpha = (sum.at * sum.bb - sum.bt * sum.ab) / det;
  double inverse_beta = (sum.aa * sum.bt - sum.ab * sum.at) / det;
  if (!(alpha >= 0)) {
    alpha = 0;
    inverse_beta = sum.bt / sum.bb;
  }
  if (!(inverse_beta > 0) || !std::isfinite(inverse_beta) || !std::isfinite(alpha)) {
    throw InvalidConfig(where +
                        ": the samples give no positive bandwidth (times do not grow "
                        "with the size); expected a grid of sizes up to megabytes");
  }
  return {.latency = alpha, .bandwidth = 1 / inverse_beta};
}

double bus_bandwidth(CommOp op, std::int64_t bytes, std::int64_t ranks, double seconds) {
  std::vector<std::string> problems;
  check_bytes(problems, bytes);
  detail::check_positive(problems, "ranks", ranks);
  if (bytes > 0) detail::check_positive(problems, "seconds", seconds);
  detail::throw_if_problems("bus bandwidth of " + std::string(to_string(op)), problems);
  if (bytes == 0) return 0;
  return double(bytes) / seconds * bus_factor(op, double(ranks));
}

double wire_bytes(CommOp op, std::int64_t bytes, std::int64_t ranks) {
  std::vector<std::string> problems;
  check_bytes(problems, bytes);
  detail::check_positive(problems, "ranks", ranks);
  detail::throw_if_problems("wire bytes of " + std::string(to_string(op)), problems);
  // A one-rank group sends nothing, though nccl-tests' broadcast/reduce factor stays 1 there.
  if (ranks == 1) return 0;
  return double(bytes) * bus_factor(op, double(ranks));
}

}  // namespace metron::models
