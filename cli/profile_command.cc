// `metron profile` (issue 17): every distinct compute operation of the step that
// `metron run` would execute, timed on the CPU backend's own payload (TorchCompute: the same
// libtorch, BLAS and threads), written as a cost profile. Note [profiling compute]:
//   - An operation is what ir::Operation describes and models::OpCost prices; its profile key
//     is OpCost::profile_key()'s ("gemm:MxNxK", "batched-gemm:BxMxNxK", "elementwise:NAME:N") at
//     the dtype the graph gives it, so the cost model finds the measured time for exactly the op
//     it would have priced (and prices everything else as before).
//   - Where: in one process per rank, each rank timing the distinct compute tasks of its own
//     issue order at the same time as the others, the j-th operation of every rank after one
//     barrier (Note [communication benchmark]): ranks share this machine's cores, caches and
//     memory in a run, and an operation measured alone runs ~10 % faster than it does there,
//     a memory-bound one that every rank runs at once (Adam) about half as fast.
//   - How: each operation of a task in the task's order, one run of it with its count (as the
//     executor runs it), timed and divided by the count: the cost model charges an op once per
//     layer, and the op finds the caches as its task leaves them (timed alone and repeated, a
//     GEMM whose weights stay cached looks up to 30 % faster). `--warmup` repetitions untimed,
//     then `--repetitions`; the time is the median of every sample of the key, all ranks.
//   - Collectives, transfers and the slow-downs during overlap are measured next in the same
//     processes (Note [profiling communication]); rank 0 writes the profile.
//   - `--sweep` measures the machine instead of a graph (Note [hardware sweep]).

#include "profile_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "executor_commands.h"
#include "integer_flags.h"
#include "metron/base/error.h"
#include "metron/base/file_io.h"
#if METRON_HAVE_CPU_BACKEND
#include "metron/exec/comm_benchmark.h"
#include "metron/exec/torch_compute.h"
#include "profile_communication.h"
#endif
#if METRON_HAVE_CUDA
#include "metron/exec/cuda/cuda_compute.h"
#include "metron/exec/cuda/cuda_info.h"
#include "metron/exec/cuda/cuda_run.h"
#endif
#include "metron/exec/operation_profile.h"
#include "metron/models/compute_cost.h"
#include "metron/models/cost_profile.h"
#include "metron/models/model_spec.h"
#include "output_files.h"
#include "profile_sweep.h"
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
  double timeout_s = 120;
  double slowdown_seconds = 1.0;
  bool sweep = false;
  SweepOptions grid;  ///< --sweep-* (the rest of it comes from the flags above)
};

std::chrono::milliseconds timeout_of(const ProfileFlags& o) {
  return std::chrono::milliseconds(std::llround(o.timeout_s * 1000));
}

using exec::ProfiledOperation;

/// The step's distinct operation lists by rank; refused when it lists none.
std::vector<std::vector<std::vector<ProfiledOperation>>> operations_to_profile(
    const scenario::Step& step) {
  auto tasks = exec::distinct_task_operations(step.graph);
  if (std::ranges::all_of(tasks, [](const auto& t) { return t.empty(); })) {
    throw InvalidConfig(
        "the step's compute tasks list no operations (a scenario with explicit "
        "costs); expected a model to profile");
  }
  return tasks;
}

#if METRON_HAVE_CPU_BACKEND
/// The compute part of the benchmark: each rank's operation lists.
std::vector<std::vector<ir::Compute>> benchmark_compute(
    const std::vector<std::vector<std::vector<ProfiledOperation>>>& by_rank) {
  std::vector<std::vector<ir::Compute>> out;
  for (const auto& tasks : by_rank) {
    auto& compute = out.emplace_back();
    for (const auto& ops : tasks) {
      ir::Compute& task = compute.emplace_back();
      for (const ProfiledOperation& t : ops) task.operations.push_back(t.op);
    }
  }
  return out;
}

/// Every operation's samples from every rank that ran it, by key; the median of each goes into
/// `profile`.
void add_compute(const std::vector<std::vector<std::vector<ProfiledOperation>>>& by_rank,
                 const exec::CommMeasurement& measured, models::CostProfile& profile) {
  std::map<std::pair<std::string, models::Precision>, std::vector<double>> samples;
  for (std::size_t r = 0; r < by_rank.size(); ++r) {
    for (std::size_t t = 0; t < by_rank[r].size(); ++t) {
      for (std::size_t o = 0; o < by_rank[r][t].size(); ++o) {
        const std::vector<double>& s = measured.compute_seconds.at(r).at(t).at(o);
        std::vector<double>& all = samples[by_rank[r][t][o].key];
        all.insert(all.end(), s.begin(), s.end());
      }
    }
  }
  for (const auto& [key, seconds] : samples) {
    const double time = exec::median_seconds(seconds);
    profile.set_compute(key.first, key.second, time);
    std::cerr << fmt::format("metron profile: {} {}: {:.3f} ms\n", key.first,
                             models::to_string(key.second), time * 1e3);
  }
}

void run_profile(const ProfileFlags& o) {
  const scenario::Scenario scenario = scenario_of(o.scenario, default_run_scenario());
  const scenario::Step step = executable_step(scenario);
  const auto tasks = operations_to_profile(step);
  CommunicationPlan comm = plan_communication(step, {.warmup = o.warmup,
                                                     .repetitions = o.repetitions,
                                                     .threads = o.threads,
                                                     .slowdown_seconds = o.slowdown_seconds});
  comm.benchmark.compute = benchmark_compute(tasks);
  std::cerr << fmt::format(
      "metron profile: {} ranks time their compute operations at once, then {} collectives, {} "
      "transfer sizes and the slow-downs\n",
      step.graph.num_ranks(), comm.collectives.size(), comm.p2p.size());
  launch_benchmark(
      comm.benchmark, step.graph.num_ranks(), timeout_of(o),
      [&](const exec::CommMeasurement& measured, const exec::BenchmarkStatus&) {
        models::CostProfile profile;
        profile.hardware = scenario.hardware.name + " (measured by metron profile on the " +
                           o.backend + " backend, " +
                           std::string(exec::TorchCompute::compute_dtype_name()) + ")";
        add_compute(tasks, measured, profile);
        if (!comm.empty()) add_communication(comm, measured, profile);
        write_outputs({{o.output, models::to_json(profile)}}, {});
        std::cout << "metron profile: "
                  << profile.size() - comm.collectives.size() - comm.p2p.size()
                  << " compute operations, " << comm.collectives.size() << " collectives and "
                  << comm.p2p.size() << " transfer sizes measured on the " << o.backend
                  << " backend (median of " << o.repetitions << ") -> " << o.output
                  << "\n  predict with them: metron simulate ... --profile " << o.output << "\n";
      });
}
#endif  // METRON_HAVE_CPU_BACKEND

#if METRON_HAVE_CUDA
/// `--backend cuda` (Note [profiling compute] for the CPU): each distinct operation on GPU 0,
/// alone, its task's count of repetitions in a row, the median of --repetitions after --warmup
/// (exec::cuda::profile_operations). Collectives and transfers are not measured on the GPU yet:
/// the profile leaves them to the hardware preset's communication model, and says so.
void run_cuda_profile(const ProfileFlags& o) {
  const scenario::Scenario scenario = scenario_of(o.scenario, default_run_scenario());
  const scenario::Step step = executable_step(scenario);
  const auto tasks = operations_to_profile(step);
  if (const exec::cuda::CudaInfo info = exec::cuda::query_cuda(); info.device_count == 0) {
    throw InvalidConfig("--backend cuda: no CUDA device is visible (" + info.error +
                        "); expected a machine with a GPU, or --backend cpu");
  }
  models::CostProfile profile;
  const std::string device = exec::cuda::CudaCompute({}).device_description();
  profile.hardware = device + " (measured by metron profile on the cuda backend: compute only)";
  const std::size_t timed = exec::cuda::profile_operations(
      tasks, {.iterations = o.repetitions, .warmup = o.warmup, .timeout = timeout_of(o)}, profile,
      [](std::size_t done, std::size_t total, const std::string& what, double seconds) {
        std::cerr << fmt::format("metron profile: [{}/{}] {}: {:.3f} ms\n", done, total, what,
                                 seconds * 1e3);
      });
  write_outputs({{o.output, models::to_json(profile)}}, {});
  std::cout << "metron profile: " << timed << " compute operations measured on " << device
            << " (median of " << o.repetitions << ") -> " << o.output
            << "\n  collectives and transfers are not measured on the cuda backend yet: "
               "'metron simulate --profile' prices them with the hardware's model"
            << "\n  predict with them: metron simulate ... --profile " << o.output << "\n";
}
#endif

/// The flags --sweep takes; every other one describes a scenario, which a sweep has none of.
/// Option groups (the sync flags) are apps of their own, without a name: walked too.
void check_sweep_flags(const CLI::App& cmd, bool sweep) {
  static const std::set<std::string> kSweepFlags = {"--output",           "--sweep",
                                                    "--backend",          "--repetitions",
                                                    "--warmup",           "--threads",
                                                    "--timeout",          "--sweep-gemm-max",
                                                    "--sweep-add-max",    "--sweep-message-max",
                                                    "--slowdown-seconds", "--help"};
  for (const CLI::Option* option : cmd.get_options()) {
    if (option->count() == 0) continue;
    // An option by its first long name, a positional (the scenario) by its own.
    const std::string name = option->get_name();
    const bool sweep_only = name.starts_with("--sweep-");
    if (sweep && !kSweepFlags.contains(name)) {
      throw InvalidConfig(name +
                          ": --sweep measures this machine, not a scenario; expected none of the "
                          "scenario flags with it");
    }
    if (!sweep && sweep_only) throw InvalidConfig(name + ": expected it only with --sweep");
  }
  for (const CLI::App* group :
       cmd.get_subcommands([](const CLI::App* app) { return app->get_name().empty(); })) {
    check_sweep_flags(*group, sweep);
  }
}

#if METRON_HAVE_CPU_BACKEND
/// The command line that reproduces a sweep, for its document: the flags that differ from the
/// defaults.
std::string sweep_command(const ProfileFlags& o) {
  const ProfileFlags d;
  std::string command = "metron profile --sweep -o " + o.output;
  const auto flag = [&](const char* name, auto value, auto default_value) {
    if (value != default_value) command += fmt::format(" {} {}", name, value);
  };
  flag("--repetitions", o.repetitions, d.repetitions);
  flag("--warmup", o.warmup, d.warmup);
  flag("--threads", o.threads, d.threads);
  flag("--slowdown-seconds", o.slowdown_seconds, d.slowdown_seconds);
  flag("--sweep-gemm-max", o.grid.gemm_max, d.grid.gemm_max);
  flag("--sweep-add-max", o.grid.add_max, d.grid.add_max);
  flag("--sweep-message-max", o.grid.message_max, d.grid.message_max);
  return command;
}
#endif

void run(const ProfileFlags& o, const CLI::App& cmd) {
  check_sweep_flags(cmd, o.sweep);
  check_outputs({{"--output", o.output}});
  check_backend_built(o.backend);
#if METRON_HAVE_CUDA
  if (o.backend == "cuda") {
    if (o.sweep) {
      throw InvalidConfig(
          "--sweep with --backend cuda: the GPU sweep is bench/cuda_profile (its figures are in "
          "models/profiles/h100-sxm-measured.json); expected --sweep with --backend cpu, or a "
          "scenario to profile on the GPU");
    }
    run_cuda_profile(o);
    return;
  }
#endif
#if METRON_HAVE_CPU_BACKEND
  if (!o.sweep) {
    run_profile(o);
    return;
  }
  SweepOptions sweep = o.grid;
  sweep.output = o.output;
  sweep.warmup = o.warmup;
  sweep.repetitions = o.repetitions;
  sweep.threads = o.threads;
  sweep.timeout = timeout_of(o);
  sweep.slowdown_seconds = o.slowdown_seconds;
  sweep.command = sweep_command(o);
  run_sweep(sweep);
#endif
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto o = std::make_shared<ProfileFlags>();
  CLI::App* cmd = app.add_subcommand("profile", std::string(kProfileDescription));
  add_scenario_flags(*cmd, o->scenario);
  cmd->add_option("-o,--output", o->output, "the cost-profile (or, with --sweep, hardware) JSON")
      ->required();
  cmd->add_flag("--sweep", o->sweep, "measure this machine and write a hardware spec");
  cmd->add_option("--backend", o->backend,
                  "cpu, or cuda: the compute operations on GPU 0 (collectives not yet)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--repetitions", o->repetitions, "timed runs per measurement (median)")
      ->check(integer_in(1, 1000))
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "untimed runs per measurement first")
      ->check(integer_in(0, 1000))
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "libtorch threads")
      ->check(integer_in(1, 256))
      ->capture_default_str();
  cmd->add_option("--timeout", o->timeout_s,
                  "seconds without progress after which the measurement fails, naming what each\n"
                  "rank waits for")
      ->check(number_in(0.1, 86400))
      ->capture_default_str();
  // How long the slow-down and the sweep's grid take, for quick runs (tests).
  cmd->add_option("--slowdown-seconds", o->slowdown_seconds,
                  "time the compute at least this long alone and again while communicating")
      ->check(number_in(0, 3600))
      ->capture_default_str()
      ->group("Measurement size (advanced)");
  cmd->add_option("--sweep-gemm-max", o->grid.gemm_max, "n of the largest square GEMM")
      ->check(integer_in(16, 16384))
      ->group("Measurement size (advanced)");
  cmd->add_option("--sweep-add-max", o->grid.add_max, "elements of the largest add")
      ->check(integer_in(1, std::int64_t{1} << 28))
      ->group("Measurement size (advanced)");
  cmd->add_option("--sweep-message-max", o->grid.message_max, "bytes of the largest all-reduce")
      ->check(integer_in(16, std::int64_t{1} << 30))
      ->group("Measurement size (advanced)");
  check_integer_options(*cmd);
  cmd->callback([o, cmd] { run(*o, *cmd); });
}

}  // namespace metron::cli
