// Note [profiling communication] (profile_communication.h).

#include "profile_communication.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <variant>

#include "metron/base/error.h"
#include "metron/exec/local_launcher.h"
#include "metron/exec/torch_compute.h"
#include "run_command.h"

namespace metron::cli {
namespace {

std::vector<std::vector<std::int32_t>> group_members(const ir::Graph& graph) {
  std::vector<std::vector<std::int32_t>> groups;
  for (const ir::Group& group : graph.data().groups) {
    std::vector<std::int32_t>& members = groups.emplace_back();
    for (const ir::RankId r : group.ranks) members.push_back(r.value());
  }
  return groups;
}

void add_collective(CommunicationPlan& plan, const ir::Graph& graph, const ir::Collective& c,
                    const models::GroupPlacement& where) {
  const std::size_t members = graph.group(c.group).ranks.size();
  if (static_cast<std::int64_t>(members) != where.ranks) {
    throw InvalidConfig(fmt::format(
        "profile: group \"{}\" has {} members in the graph but its collectives are priced for {} "
        "ranks; expected the full graph 'metron run' executes",
        graph.group(c.group).name, members, where.ranks));
  }
  // The task as the executor issues it: count calls back to back (Note [profiling
  // communication]).
  plan.benchmark.collectives.push_back(
      {.group = static_cast<std::int32_t>(c.group.index()), .call = c});
  plan.collectives.push_back({.op = scenario::comm_op(c.op),
                              .group = where,
                              .bytes = c.bytes / c.count,
                              .calls = c.count});
}

/// The largest GEMM of the graph by FLOPs, once; a 1024³ fp32 GEMM when there is none.
ir::Compute largest_gemm(const ir::Graph& graph) {
  ir::Operation best{.name = "slowdown-gemm",
                     .kind = ir::OperationKind::kGemm,
                     .m = 1024,
                     .n = 1024,
                     .k = 1024,
                     .dtype = ir::DType::kFp32};
  double best_flops = 0;
  for (const ir::Task& t : graph.tasks()) {
    const auto* c = std::get_if<ir::Compute>(&t.op);
    if (c == nullptr) continue;
    for (const ir::Operation& op : c->operations) {
      if (op.kind == ir::OperationKind::kElementwise) continue;
      const double flops = 2.0 * static_cast<double>(op.batch) * static_cast<double>(op.m) *
                           static_cast<double>(op.n) * static_cast<double>(op.k);
      if (flops > best_flops) {
        best_flops = flops;
        best = op;
        best.count = 1;
      }
    }
  }
  return {.operations = {best}};
}

/// The slow-down's load: the largest message of the plan.
std::variant<exec::CollectiveProbe, exec::TransferProbe> largest_message(
    const exec::CommBenchmark& b) {
  std::variant<exec::CollectiveProbe, exec::TransferProbe> load;
  std::int64_t largest = -1;
  for (const exec::CollectiveProbe& c : b.collectives) {
    if (c.call.bytes > largest) {
      largest = c.call.bytes;
      load = c;
    }
  }
  for (const exec::TransferProbe& t : b.transfers) {
    if (t.bytes > largest) {
      largest = t.bytes;
      load = t;
    }
  }
  return load;
}

std::string placement_text(const models::GroupPlacement& g) {
  return fmt::format("{} ranks on {} node{}", g.ranks, g.nodes, g.nodes == 1 ? "" : "s");
}

}  // namespace

CommunicationPlan plan_communication(const scenario::Step& step, const TimingSettings& timing) {
  const ir::Graph& graph = step.graph;
  CommunicationPlan plan;
  plan.benchmark.groups = group_members(graph);
  plan.benchmark.warmup = timing.warmup;
  plan.benchmark.repetitions = timing.repetitions;
  plan.benchmark.intra_op_threads = timing.threads;
  std::set<std::tuple<models::CommOp, std::int64_t, std::int64_t, std::int64_t>> seen;
  std::set<std::int64_t> seen_p2p;
  for (const ir::Task& t : graph.tasks()) {
    if (const auto* c = std::get_if<ir::Collective>(&t.op)) {
      const models::GroupPlacement where = step.group_placements[c->group.index()];
      const std::int64_t bytes = c->bytes / c->count;
      if (bytes == 0 ||
          !seen.emplace(scenario::comm_op(c->op), where.ranks, where.nodes, bytes).second) {
        continue;
      }
      add_collective(plan, graph, *c, where);
    } else if (const auto* s = std::get_if<ir::Send>(&t.op)) {
      if (s->bytes == 0 || !seen_p2p.insert(s->bytes).second) continue;
      plan.benchmark.transfers.push_back(
          {.sender = t.rank.value(), .receiver = s->peer.value(), .bytes = s->bytes});
      plan.p2p.emplace_back(s->bytes, step.p2p_same_node);
    }
  }
  if (!plan.empty()) {
    plan.benchmark.slowdown = exec::SlowdownProbe{.compute = largest_gemm(graph),
                                                  .load = largest_message(plan.benchmark),
                                                  .min_seconds = timing.slowdown_seconds};
  }
  return plan;
}

void add_communication(const CommunicationPlan& plan, const exec::CommMeasurement& measured,
                       models::CostProfile& profile) {
  for (std::size_t i = 0; i < plan.collectives.size(); ++i) {
    const CollectiveKey& key = plan.collectives[i];
    const double seconds = measured.collective_seconds[i] / key.calls;
    profile.set_collective(key.op, key.group, key.bytes, seconds);
    std::cerr << fmt::format(
        "metron profile: {} of {} B over {}: {:.3f} ms{}\n", models::to_string(key.op), key.bytes,
        placement_text(key.group), seconds * 1e3,
        key.calls > 1 ? fmt::format(" (per call of {} back to back)", key.calls) : std::string());
  }
  for (std::size_t i = 0; i < plan.p2p.size(); ++i) {
    const auto [bytes, same_node] = plan.p2p[i];
    profile.set_p2p(bytes, same_node, measured.transfer_seconds[i]);
    std::cerr << fmt::format("metron profile: p2p of {} B ({}): {:.3f} ms\n", bytes,
                             same_node ? "same node" : "across nodes",
                             measured.transfer_seconds[i] * 1e3);
  }
  if (measured.slowdown) {
    const exec::SlowdownMeasurement& s = *measured.slowdown;
    profile.compute_slowdown_during_comm =
        std::min(s.slowdown, models::CostProfile::kMaxComputeSlowdown);
    profile.comm_slowdown_during_compute =
        std::min(s.comm_slowdown, models::CostProfile::kMaxComputeSlowdown);
    std::cerr << fmt::format(
        "metron profile: compute slow-down during communication: {:.3f} ({:.3f} ms alone, "
        "{:.3f} ms while communicating, {} messages meanwhile)\n"
        "metron profile: communication slow-down during compute: {:.3f} ({:.3f} ms alone, "
        "{:.3f} ms while every member computes)\n",
        *profile.compute_slowdown_during_comm, s.alone_seconds * 1e3, s.with_comm_seconds * 1e3,
        s.load_rounds, *profile.comm_slowdown_during_compute, s.comm_alone_seconds * 1e3,
        s.comm_with_compute_seconds * 1e3);
  }
}

void launch_benchmark(const exec::CommBenchmark& benchmark, std::int32_t ranks,
                      std::chrono::milliseconds timeout, const AtRankZero& at_rank_zero) {
  const std::int32_t port = free_port();
  // The launcher's watchdog sees every rank; a rank's own timeouts (the store's, Gloo's) see only
  // itself, so they are set to fire later, as in `metron run`.
  const auto worker_timeout = 2 * timeout;
  exec::stop_blas_threads();
  const exec::LaunchResult launched = exec::launch_local(
      {.workers = ranks, .timeout = timeout, .grace = std::chrono::milliseconds(2000)},
      [&](std::int32_t rank, exec::WorkerChannel& channel) {
        const exec::BenchmarkStatus status = [&channel](std::string_view s) {
          channel.set_status(s);
        };
        const std::optional<exec::CommMeasurement> measured =
            exec::measure_communication(benchmark,
                                        {.host = "127.0.0.1",
                                         .port = port,
                                         .rank = rank,
                                         .world_size = ranks,
                                         .timeout = worker_timeout},
                                        status);
        if (measured) at_rank_zero(*measured, status);
      });
  if (!launched.ok()) {
    const exec::LaunchFailure& failure = *launched.failure;
    if (failure.input_error) throw InvalidConfig(failure.message);
    throw BackendError("the profile failed: " + failure.message);
  }
}

}  // namespace metron::cli
