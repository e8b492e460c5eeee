// `metron profile` (issue 17, first part): every distinct compute operation of the step that
// `metron run` would execute, timed on the CPU backend's own payload (TorchCompute: the same
// libtorch, BLAS and threads), written as a cost profile. Note [profiling compute]:
//   - An operation is what ir::Operation describes and models::OpCost prices; its profile key
//     is OpCost::profile_key()'s ("gemm:MxNxK", "batched-gemm:BxMxNxK", "elementwise:NAME:N") at
//     the dtype the graph gives it, so the cost model finds the measured time for exactly the op
//     it would have priced (and prices everything else as before).
//   - One repetition is timed at a time (count 1), `--warmup` untimed first, then the median of
//     `--repetitions`: the cost model charges an op once per layer.
//   - Collectives and transfers are not measured yet: the profile leaves them to the
//     communication model.

#include "profile_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "integer_flags.h"
#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/exec/torch_compute.h"
#include "metron/models/compute_cost.h"
#include "metron/models/cost_profile.h"
#include "metron/models/model_spec.h"
#include "output_files.h"
#include "run_command.h"
#include "scenario_flags.h"

namespace metron::cli {
namespace {

struct ProfileFlags {
  ScenarioFlags scenario;
  std::string output;
  std::string backend = "cpu";
  std::int32_t repetitions = 5;
  std::int32_t warmup = 1;
  std::int32_t threads = 1;
};

/// The key the cost model stores an operation's measured time under: the operation as the
/// OpCost it was made from, so that the key's format has one owner (OpCost::profile_key).
std::string profile_key(const ir::Operation& op) {
  models::OpCost cost{.name = op.name, .m = op.m, .n = op.n, .k = op.k, .batch = op.batch};
  if (op.kind == ir::OperationKind::kGemm) cost.kind = models::OpKind::kGemm;
  if (op.kind == ir::OperationKind::kBatchedGemm) cost.kind = models::OpKind::kBatchedGemm;
  return cost.profile_key();
}

/// One operation as the profile times it: its key, its precision, and the operation as its
/// task runs it (with the task's count, so a run repeats it as the executor does).
struct TimedOperation {
  std::pair<std::string, models::Precision> key;
  ir::Operation op;
};

/// The distinct operation lists of the graph's compute tasks, rank by rank in issue order, each
/// with its priced operations (Note [profiling compute]).
std::vector<std::vector<TimedOperation>> distinct_task_operations(const ir::Graph& graph) {
  std::vector<std::vector<TimedOperation>> out;
  std::set<std::vector<std::pair<std::string, std::int32_t>>> seen;  // (key, count) per op
  for (std::int32_t r = 0; r < graph.num_ranks(); ++r) {
    for (const ir::TaskId id : graph.issue_order(ir::RankId{r})) {
      const auto* compute = std::get_if<ir::Compute>(&graph.task(id).op);
      if (compute == nullptr) continue;
      std::vector<TimedOperation> ops;
      std::vector<std::pair<std::string, std::int32_t>> signature;
      for (const ir::Operation& op : compute->operations) {
        const std::optional<models::Precision> precision =
            models::parse_precision(ir::to_string(op.dtype));
        if (!precision) continue;  // integer data is never a priced op
        ops.push_back({{profile_key(op), *precision}, op});
        signature.emplace_back(
            ops.back().key.first + ":" + std::string(models::to_string(*precision)), op.count);
      }
      if (!ops.empty() && seen.insert(std::move(signature)).second) out.push_back(std::move(ops));
    }
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void run(const ProfileFlags& o) {
  check_distinct_outputs({{"--output", o.output}});
  if (o.backend == "cuda") {
    throw InvalidConfig(
        "--backend cuda: the CUDA backend is not built yet (issue 19); expected "
        "--backend cpu");
  }
  const scenario::Scenario scenario = scenario_of(o.scenario, default_run_scenario());
  const scenario::Step step = executable_step(scenario);
  const auto tasks = distinct_task_operations(step.graph);
  if (tasks.empty()) {
    throw InvalidConfig(
        "the step's compute tasks list no operations (a scenario with explicit "
        "costs); expected a model to profile");
  }
  models::CostProfile profile;
  profile.hardware = scenario.hardware.name + " (measured by metron profile on the " + o.backend +
                     " backend, " + std::string(exec::TorchCompute::compute_dtype_name()) + ")";
  exec::TorchCompute compute({.intra_op_threads = o.threads});
  for (const auto& ops : tasks) {
    for (const TimedOperation& t : ops) compute.prepare(ir::Compute{.operations = {t.op}});
  }
  std::map<std::pair<std::string, models::Precision>, std::vector<double>> samples;
  for (std::int32_t rep = -o.warmup; rep < o.repetitions; ++rep) {
    for (const auto& ops : tasks) {
      for (const TimedOperation& t : ops) {
        const ir::Compute one{.operations = {t.op}};
        const auto start = std::chrono::steady_clock::now();
        compute.run(one);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (rep >= 0) samples[t.key].push_back(seconds / t.op.count);
      }
    }
    if (rep >= 0) {
      std::cerr << fmt::format("metron profile: repetition {}/{} done\n", rep + 1, o.repetitions);
    }
  }
  for (const auto& [key, seconds] : samples) {
    const double time = median(seconds);
    profile.set_compute(key.first, key.second, time);
    std::cerr << fmt::format("metron profile: {} {}: {:.3f} ms\n", key.first,
                             models::to_string(key.second), time * 1e3);
  }
  const auto ops = samples;
  write_outputs({{o.output, models::to_json(profile)}}, {});
  std::cout << "metron profile: " << ops.size() << " compute operations measured on the "
            << o.backend << " backend (median of " << o.repetitions << ") -> " << o.output
            << "\n  predict with them: metron simulate ... --profile " << o.output << "\n";
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto o = std::make_shared<ProfileFlags>();
  CLI::App* cmd = app.add_subcommand(
      "profile",
      "Measure what a step is made of on the executor's backend and write a cost profile:\n"
      "every distinct compute operation of the step 'metron run' would execute (each GEMM\n"
      "shape, batched GEMM and element-wise op, as 'metron cost --ops' lists them), timed with\n"
      "the CPU backend's own libtorch payload, the median of --repetitions after --warmup.\n"
      "'metron simulate --profile FILE' (and run, cost) then price those ops with the measured\n"
      "times and everything else as before. Collectives and transfers are not measured yet.\n"
      "Takes the scenario flags of 'metron run', from the same default.");
  add_scenario_flags(*cmd, o->scenario);
  cmd->add_option("-o,--output", o->output, "the cost-profile JSON to write")->required();
  cmd->add_option("--backend", o->backend, "cpu (cuda comes with its issue)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--repetitions", o->repetitions, "timed runs per operation (median)")
      ->check(integer_in(1, 1000))
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "untimed runs per operation first")
      ->check(integer_in(0, 1000))
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "libtorch threads")
      ->check(integer_in(1, 256))
      ->capture_default_str();
  check_integer_options(*cmd);
  cmd->callback([o] { run(*o); });
}

}  // namespace metron::cli
