// `metron run` (issue 16): builds the step a scenario describes (or reads a graph file) with the
// operations its compute tasks run, executes it on the CPU backend (or the CUDA one) with one
// process per rank, and reports the median of the measured iterations as `metron simulate`
// reports a prediction. Each backend is compiled in when CMake built it (METRON_HAVE_CPU_BACKEND,
// METRON_HAVE_CUDA); a metron without one refuses it by name.

#include "run_command.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "executor_commands.h"
#include "graph_files.h"
#include "integer_flags.h"
#include "launch_environment.h"
#include "metron/base/diagnostics.h"
#include "metron/base/error.h"
#include "metron/base/file_io.h"
#if METRON_HAVE_CPU_BACKEND
#include "metron/exec/cpu_run.h"
#include "metron/exec/torch_compute.h"
#include "model_run.h"
#endif
#if METRON_HAVE_CUDA
#include "metron/exec/cuda/cuda_rank.h"
#endif
#include "metron/exec/local_launcher.h"
#include "metron/exec/rank_run.h"
#include "metron/exec/rank_store.h"
#include "metron/ir/deadlock.h"
#include "metron/models/hardware_presets.h"
#include "metron/models/model_presets.h"
#include "metron/scenario/evaluation.h"
#include "metron/scenario/step_builder.h"
#include "metron/scenario/world_layout.h"
#include "metron/sim/simulator.h"
#include "metron/sim/timeline_result.h"
#include "metron/sim/trace_export.h"
#include "metron/timelines/kineto_trace.h"
#include "metron/timelines/merged_trace.h"
#include "metron/traces/chrome_trace_writer.h"
#include "metron/traces/trace_comparison.h"
#include "output_files.h"
#include "scenario_flags.h"
#include "trace_metadata.h"

namespace metron::cli {
namespace {

struct RunFlags {
  ScenarioFlags scenario;
  std::int32_t iterations = 5;
  std::int32_t warmup = 1;
  double timeout_s = 120;
  std::optional<std::int32_t> nproc;
  std::string backend = "cpu";
  std::int32_t threads = 1;
  std::optional<std::int32_t> store_port;
  std::string json;
  std::string trace;
  std::string trace_dir;
  bool compare = false;
  std::string payload = "operations";
  bool check = false;
  std::uint64_t seed = 1234;
};

/// Ranks `metron run` forks at most: each is a process with its threads and its tensors on this
/// machine, so a scenario of thousands of GPUs is refused rather than started.
constexpr std::int32_t kMaxLocalRanks = 64;

/// What runs: the scenario's step, or a graph file's (then without a scenario's figures).
struct Job {
  scenario::Scenario scenario;
  scenario::Step step;
  bool from_graph_file = false;
#if METRON_HAVE_CPU_BACKEND
  std::optional<exec::ModelPayload> model;  ///< --payload model
#endif
};

bool is_graph_file(const std::string& path) {
  if (path.empty() || path == "-") return false;
  // The graph JSON form names itself in its first key (ir/json_format.h); a scenario does not.
  return read_file(path).substr(0, 4096).find("\"metron-graph\"") != std::string::npos;
}

Job job_of(const RunFlags& o) {
  Job job;
  if (is_graph_file(o.scenario.scenario_file)) {
    Diagnostics diagnostics;
    job.step.graph = load_graph(o.scenario.scenario_file, std::nullopt, diagnostics);
    job.step.pipeline_ranks = job.step.graph.num_ranks();
    job.scenario.model.reset();
    job.from_graph_file = true;
  } else if (o.payload == "model") {
#if METRON_HAVE_CPU_BACKEND
    job.scenario = scenario_of(o.scenario, default_model_run_scenario());
    if (train_in_fp32(job.scenario)) {
      std::cerr << "metron run: the model payload trains in fp32: the graph is built for "
                   "model dtype fp32\n";
    }
    job.step = executable_step(job.scenario);
    job.model =
        model_payload_of(job.scenario, job.step, std::int64_t{o.warmup} + o.iterations, o.seed);
#endif
  } else {
    job.scenario = scenario_of(o.scenario, default_run_scenario());
    job.step = executable_step(job.scenario);
  }
  // A graph that cannot finish under the ordering rules is refused before any process starts,
  // with every blocked task named (exit 2), as `graph check` and `simulate` refuse it: Gloo would
  // hang on it or, where its sends do not wait for their receives, finish a step that NCCL
  // would hang on.
  ir::check_deadlock(job.step.graph);
  return job;
}

/// The measured step as `simulate --json` reports a simulated one, plus what only a measurement
/// has: every iteration's time and how the data was carried.
std::string result_json(const scenario::Evaluation& e, const exec::MeasuredStep& m,
                        const RunFlags& o, const nlohmann::ordered_json* training) {
  nlohmann::ordered_json json = nlohmann::ordered_json::parse(scenario::result_json(e));
  nlohmann::ordered_json iterations = nlohmann::ordered_json::array();
  for (const std::int64_t ns : m.iteration_ns) iterations.push_back(static_cast<double>(ns) / 1e6);
  json["measured"] = {
      {"backend", o.backend},
      {"ranks", e.step.graph.num_ranks()},
      {"warmup_iterations", o.warmup},
      {"iteration_times_ms", iterations},
      {"median_iteration", m.median_iteration},
  };
#if METRON_HAVE_CPU_BACKEND
  if (o.backend == "cpu") {
    json["measured"]["compute_dtype"] = std::string(exec::TorchCompute::compute_dtype_name());
    json["measured"]["wire_dtypes"] = "bf16 carried as fp16, fp8 as uint8 (Gloo has neither)";
  }
#endif
  if (o.backend == "cuda") {
    // cuBLASLt runs each GEMM in its task's dtype; NCCL carries bf16 and fp8 e4m3 as themselves.
    json["measured"]["compute_dtype"] = "each task's own (cuBLASLt; fp8 as e4m3)";
    json["measured"]["wire_dtypes"] = "each collective's own (NCCL)";
  }
  if (training != nullptr) json["training"] = *training;
  return json.dump(2) + "\n";
}

/// The summary `simulate` prints, for what was executed; a graph file has no scenario, so only
/// the figures a graph alone gives.
std::string summary(const Job& job, const scenario::Evaluation& e) {
  if (job.from_graph_file) {
    return fmt::format(
        "  iteration time        {:.3f} ms\n  pipeline bubble       {:.1f}%\n"
        "  exposed communication {:.1f}% of the step\n  executed              {} ranks, {} "
        "tasks\n",
        e.iteration_time_s * 1e3, e.bubble_fraction * 100, e.exposed_comm_fraction * 100,
        e.step.graph.num_ranks(), e.step.graph.num_tasks());
  }
  std::string text = scenario::summary_text(e);
  const std::string simulated = "  simulated             ";
  if (const std::size_t at = text.find(simulated); at != std::string::npos) {
    text.replace(at, simulated.size(), "  executed              ");
  }
  return text;
}

/// `training`: what a model-payload run trained (TrainingReport::json), for the result JSON.
void report(const Job& job, const exec::MeasuredStep& measured, const RunFlags& o,
            const nlohmann::ordered_json* training = nullptr) {
  const ir::Graph& graph = job.step.graph;
  sim::SimResult result = sim::timeline_result(graph, measured.timeline);
  const scenario::Evaluation evaluation =
      scenario::evaluation_of(job.scenario, job.step, std::move(result));
  std::vector<OutputFile> files;
  if (!o.json.empty()) files.push_back({o.json, result_json(evaluation, measured, o, training)});
  std::vector<TraceOutput> traces;
  timelines::Timeline timeline = measured.timeline;
  const sim::TraceOptions options =
      job.from_graph_file ? sim::TraceOptions{} : scenario::trace_options(job.scenario, job.step);
  timeline.static_memory_bytes = options.static_memory_bytes;
  for (const sim::RankMetrics& rank : evaluation.result.ranks) {
    std::vector<timelines::BubbleSpan>& bubbles = timeline.bubbles.emplace_back();
    for (const sim::Bubble& b : rank.bubbles) {
      timelines::BubbleSpan span{
          .start_ns = b.start, .end_ns = b.end, .reason = std::string(sim::to_string(b.cause))};
      if (b.waited_on.valid()) span.waited_on_task = b.waited_on.value();
      bubbles.push_back(std::move(span));
    }
  }
  const timelines::WorldLayout layout =
      options.layout ? *options.layout : timelines::graph_world_layout(graph);
  std::vector<traces::Arg> metadata =
      job.from_graph_file ? std::vector<traces::Arg>{} : trace_metadata(job.scenario);
  std::vector<traces::Arg> measured_metadata = metadata;
  measured_metadata.push_back({"source", "measured (metron run, " + o.backend + " backend)"});
  const traces::TraceDocument merged =
      timelines::merged_trace(graph, timeline, layout, measured_metadata);
  if (!o.trace.empty()) traces.push_back({o.trace, merged});
  if (!o.trace_dir.empty()) {
    std::vector<traces::TraceDocument> ranks =
        timelines::rank_traces(graph, timeline, layout, measured_metadata);
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      traces.push_back({(std::filesystem::path(o.trace_dir) /
                         timelines::rank_trace_file_name(layout.world_rank[r]))
                            .string(),
                        std::move(ranks[r])});
    }
    create_output_directory("--trace-dir", o.trace_dir);
  }
  std::cout << "metron run: " << graph.num_ranks() << " ranks on the " << o.backend
            << " backend, median of " << measured.iteration_ns.size() << " iterations (after "
            << o.warmup << " warm-up)\n"
            << summary(job, evaluation);
  std::cout << "  iteration times       ";
  for (std::size_t i = 0; i < measured.iteration_ns.size(); ++i) {
    std::cout << (i == 0 ? "" : ", ") << static_cast<double>(measured.iteration_ns[i]) / 1e6;
  }
  std::cout << " ms\n";
  const std::vector<std::string> written = write_outputs(std::move(files), traces);
  if (!o.json.empty()) std::cout << "  result JSON           " << o.json << "\n";
  if (!o.trace.empty()) {
    std::cout << "  trace                 " << written.front()
              << " (open in https://ui.perfetto.dev)\n";
  }
  if (!o.trace_dir.empty()) {
    std::cout << "  per-rank traces       " << o.trace_dir << "/ (" << graph.num_ranks()
              << " files rank-N.json, for Holistic Trace Analysis)\n";
  }
  if (o.compare) {
    // The prediction of the very graph that ran, through the same trace layout, so that the
    // comparison reads both alike (Note [trace comparison]).
    const sim::SimResult predicted =
        sim::simulate(graph, job.step.durations, job.step.sim_options());
    metadata.push_back({"source", std::string("predicted (metron simulate)")});
    const std::string predicted_text =
        traces::to_chrome_json(sim::simulation_trace(graph, predicted, metadata, options));
    std::cout << "\npredicted (metron simulate) against measured (this run)\n"
              << traces::compare_trace_steps(
                     traces::read_trace_step(predicted_text, "the prediction"),
                     traces::read_trace_step(traces::to_chrome_json(merged), "the measurement"),
                     10);
  }
  std::cout.flush();
}

/// A failed run loses nothing it recorded: each rank writes its own per-rank trace of the
/// iteration it was in (the tasks that completed) into --trace-dir, marked partial. The merged
/// trace needs every rank's measurements at rank 0, which a failed run never gathers.
void write_partial_trace(const Job& job, const RunFlags& o, std::int32_t rank,
                         const std::vector<exec::RankIteration>& iterations) {
  if (o.trace_dir.empty() || iterations.empty() || iterations.back().origin_ns < 0) return;
  const exec::RankIteration& it = iterations.back();
  const ir::Graph& graph = job.step.graph;
  timelines::Timeline timeline;
  timeline.tasks.assign(static_cast<std::size_t>(graph.num_tasks()), {});
  for (const exec::LaunchTiming& t : it.record.launches) {
    timeline.tasks[t.id.index()] = {t.start_ns - it.origin_ns, t.end_ns - it.origin_ns};
    timeline.step_end_ns = std::max(timeline.step_end_ns, t.end_ns - it.origin_ns);
  }
  timeline.memory.resize(static_cast<std::size_t>(graph.num_ranks()));
  for (const auto& [at, bytes] : it.record.memory) {
    timeline.memory[static_cast<std::size_t>(rank)].emplace_back(
        std::max<std::int64_t>(0, at - it.origin_ns), bytes);
  }
  const sim::TraceOptions options =
      job.from_graph_file ? sim::TraceOptions{} : scenario::trace_options(job.scenario, job.step);
  const timelines::WorldLayout layout =
      options.layout ? *options.layout : timelines::graph_world_layout(graph);
  std::vector<traces::Arg> metadata =
      job.from_graph_file ? std::vector<traces::Arg>{} : trace_metadata(job.scenario);
  metadata.push_back({"source", "measured (metron run, " + o.backend +
                                    " backend), partial: the run failed in this iteration"});
  std::vector<traces::TraceDocument> docs =
      timelines::rank_traces(graph, timeline, layout, std::move(metadata));
  create_output_directory("--trace-dir", o.trace_dir);
  const std::string path =
      (std::filesystem::path(o.trace_dir) /
       timelines::rank_trace_file_name(layout.world_rank[static_cast<std::size_t>(rank)]))
          .string();
  write_outputs({}, {{path, std::move(docs[static_cast<std::size_t>(rank)])}});
  std::cerr << "metron run: rank " << rank << " wrote what it recorded to " << path << "\n";
}

exec::RunOptions run_options(const RunFlags& o, const Job& job, std::int32_t rank) {
  return {.iterations = o.iterations,
          .warmup = o.warmup,
          .timeout = std::chrono::milliseconds(std::llround(o.timeout_s * 1000)),
          .intra_op_threads = o.threads,
          .on_failure = [&o, &job, rank](const std::vector<exec::RankIteration>& iterations) {
            write_partial_trace(job, o, rank, iterations);
          }};
}

/// One rank on the chosen backend; `device` is the rank's GPU on its machine (cuda only).
std::optional<exec::MeasuredStep> run_rank(const RunFlags& o, const ir::Graph& graph,
                                           const exec::Rendezvous& rendezvous,
                                           const exec::RunOptions& options, std::int32_t device,
                                           const exec::StatusSink& status) {
#if METRON_HAVE_CUDA
  if (o.backend == "cuda") {
    return exec::cuda::run_cuda_rank(graph, rendezvous, device, options, status);
  }
#else
  static_cast<void>(device);
#endif
#if METRON_HAVE_CPU_BACKEND
  if (o.backend == "cpu") return exec::run_cpu_rank(graph, rendezvous, options, status);
#else
  static_cast<void>(graph);
  static_cast<void>(rendezvous);
  static_cast<void>(options);
  static_cast<void>(status);
#endif
  throw InternalError(__FILE__, __LINE__,
                      "backend '" + o.backend + "' should have been refused before any rank");
}

/// One rank on the chosen backend and payload; rank 0 reports what was measured (and trained).
/// `device` is the rank's GPU on its machine (cuda only).
void run_and_report(const RunFlags& o, const Job& job, const exec::Rendezvous& rendezvous,
                    const exec::RunOptions& options, std::int32_t device,
                    const exec::StatusSink& status) {
#if METRON_HAVE_CPU_BACKEND
  if (job.model) {
    const std::optional<exec::ModelRun> run =
        exec::run_cpu_model_rank(job.step.graph, rendezvous, options, *job.model, status);
    if (!run) return;
    const TrainingReport training = training_report(*job.model, run->records, o.check);
    report(job, run->measured, o, &training.json);
    std::cout << training.text;
    std::cout.flush();
    if (!training.ok) {
      throw BackendError("--check: the run did not train as the single-process reference: " +
                         training.failure);
    }
    return;
  }
#endif
  const std::optional<exec::MeasuredStep> measured =
      run_rank(o, job.step.graph, rendezvous, options, device, status);
  if (measured) report(job, *measured, o);
}

/// Refuses payload flags that do not go together, before anything is built.
void check_payload_flags(const RunFlags& o) {
  if (o.check && o.payload != "model") {
    throw InvalidConfig(
        "--check: the timing payload computes no values to check; expected --payload model");
  }
  if (o.payload != "model") return;
  if (o.backend != "cpu") {
    throw InvalidConfig(
        "--payload model: the model payload trains on libtorch CPU tensors; "
        "expected --backend cpu");
  }
  if (is_graph_file(o.scenario.scenario_file)) {
    throw InvalidConfig(
        "--payload model: a graph file names no model to train; expected a "
        "scenario (file or flags)");
  }
}

void run(const RunFlags& o) {
  const std::optional<ExternalRank> external = external_rank(std::getenv);
  // Rank 0 writes the result and the merged trace (on its own machine, under another launcher);
  // every rank may flush its own per-rank trace into --trace-dir.
  const bool writes_results = !external || external->rank == 0;
  check_outputs({{"--json", writes_results ? o.json : ""},
                 {"--trace", writes_results ? o.trace : ""},
                 {"--trace-dir", o.trace_dir, OutputKind::kFolder}});
  check_backend_built(o.backend);
  check_payload_flags(o);
  const Job job = job_of(o);
  if (o.compare && job.from_graph_file) {
    throw InvalidConfig(
        "--compare: a graph file carries no costs to predict it with; expected a "
        "scenario (file or flags)");
  }
  const std::int32_t ranks = job.step.graph.num_ranks();
  if (o.nproc && *o.nproc != ranks) {
    throw InvalidConfig("--nproc " + std::to_string(*o.nproc) + ": the graph has " +
                        std::to_string(ranks) + " ranks; expected --nproc " +
                        std::to_string(ranks) + " (one process per rank)");
  }
  const exec::RunOptions options = run_options(o, job, 0);

  if (external) {
    if (external->world_size != ranks) {
      throw InvalidConfig(external->launcher + " started " + std::to_string(external->world_size) +
                          " processes; the graph has " + std::to_string(ranks) +
                          " ranks: expected one process per rank");
    }
    const exec::Rendezvous rendezvous{
        .host = external->host,
        .port = o.store_port.value_or(external->master_port.value_or(29500) + 1),
        .rank = external->rank,
        .world_size = ranks,
        .timeout = options.timeout};
    try {
      run_and_report(o, job, rendezvous, run_options(o, job, external->rank),
                     external->local_rank.value_or(external->rank), [](std::string_view) {});
    } catch (const Error& e) {
      // Another launcher's rank: say which rank failed, as the local launcher does.
      if (e.is_input_error()) throw;
      throw BackendError("rank " + std::to_string(external->rank) + ": " + e.what());
    }
    return;
  }

  const std::int32_t port = o.store_port.value_or(free_port());
  // The launcher's watchdog sees every rank and names what each one waits for; a rank's own
  // timeouts (its host waits, Gloo's) see only itself, so locally they are set to fire later.
  const auto worker_timeout = 2 * options.timeout;
#if METRON_HAVE_CPU_BACKEND
  exec::stop_blas_threads();
#endif
  std::cerr << "metron run: " << ranks << " ranks, " << o.warmup << " warm-up and " << o.iterations
            << " measured iterations\n";
  const exec::LaunchResult launched = exec::launch_local(
      {.workers = ranks, .timeout = options.timeout, .grace = std::chrono::milliseconds(2000)},
      [&](std::int32_t rank, exec::WorkerChannel& channel) {
        const exec::Rendezvous rendezvous{.host = "127.0.0.1",
                                          .port = port,
                                          .rank = rank,
                                          .world_size = ranks,
                                          .timeout = worker_timeout};
        exec::RunOptions worker_options = run_options(o, job, rank);
        worker_options.timeout = worker_timeout;
        // One machine: rank r runs on its GPU r (cuda).
        run_and_report(o, job, rendezvous, worker_options, rank,
                       [&channel](std::string_view status) { channel.set_status(status); });
      });
  if (!launched.ok()) {
    const exec::LaunchFailure& failure = *launched.failure;
    if (failure.input_error) throw InvalidConfig(failure.message);
    throw BackendError("the run failed: " + failure.message);
  }
}

}  // namespace

void check_backend_built(const std::string& backend) {
  if (backend == "cuda" && !METRON_HAVE_CUDA) {
    throw InvalidConfig(
        "--backend cuda: this metron was built without the CUDA backend (CMake found no CUDA "
        "toolkit with NCCL when it was configured); expected --backend cpu, or a build on a "
        "machine with both");
  }
  if (backend == "cpu" && !METRON_HAVE_CPU_BACKEND) {
    throw InvalidConfig(
        "--backend cpu: this metron was built without the CPU backend "
        "(METRON_ENABLE_CPU_BACKEND=OFF, no libtorch); expected --backend cuda, or a build with "
        "libtorch and Gloo (scripts/setup.sh)");
  }
}

std::int32_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw BackendError("cannot open a socket to find a free port for the store");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the sockets API takes sockaddr*
  auto* generic = reinterpret_cast<sockaddr*>(&address);
  const bool ok =
      ::bind(fd, generic, sizeof address) == 0 && ::getsockname(fd, generic, &length) == 0;
  ::close(fd);
  if (!ok) throw BackendError("cannot find a free port for the store on 127.0.0.1");
  return ntohs(address.sin_port);
}

scenario::Scenario default_run_scenario() {
  scenario::Scenario s = scenario::default_scenario();
  s.model = models::model_preset("gpt3-125m");
  s.hardware = models::hardware_preset("cpu-local");
  s.gpus.reset();
  s.parallel = {.tp = 1, .pp = 2, .dp = 1, .microbatch_size = 1, .seq_len = 128};
  s.parallel.num_microbatches = 4;
  s.schedule = {.name = "1f1b"};
  s.sync = {.policy = sync::SyncPolicy::kMegatronDdp};
  return s;
}

scenario::Step executable_step(const scenario::Scenario& scenario) {
  scenario::validate(scenario);
  if (scenario.parallel.cp > 1 || scenario.parallel.ep > 1) {
    throw InvalidConfig(
        "--cp/--ep: the executor runs every rank of the graph, which holds no "
        "context- or expert-parallel peers yet; expected cp = ep = 1");
  }
  const std::int64_t ranks = scenario.parallel.tp * scenario.parallel.pp * scenario.parallel.dp;
  if (ranks > kMaxLocalRanks) {
    throw InvalidConfig("the scenario has " + std::to_string(ranks) +
                        " ranks (tp·pp·dp); `metron run` executes at most " +
                        std::to_string(kMaxLocalRanks) +
                        " processes on one machine: expected a smaller scenario");
  }
  return scenario::build_step(scenario, scenario::Replication::kFull,
                              scenario::Payload::kOperations);
}

void add_run_command(CLI::App& app) {
  auto o = std::make_shared<RunFlags>();
  CLI::App* cmd = app.add_subcommand("run", std::string(kRunDescription));
  add_scenario_flags(*cmd, o->scenario);
  cmd->add_option("--iterations", o->iterations, "measured iterations; the median is reported")
      ->check(integer_in(1, 1000))
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "iterations run first and not measured")
      ->check(integer_in(0, 1000))
      ->capture_default_str();
  cmd->add_option("--timeout", o->timeout_s,
                  "seconds without progress after which the run fails, naming what each rank\n"
                  "waits for")
      ->check(number_in(0.1, 86400))
      ->capture_default_str();
  cmd->add_option("--nproc", o->nproc, "processes to start; must equal the graph's ranks")
      ->check(integer_in(1, kMaxLocalRanks));
  cmd->add_option("--backend", o->backend,
                  "cpu, or cuda: one GPU per rank (built when CMake found CUDA and NCCL)")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "libtorch threads per rank")
      ->check(integer_in(1, 256))
      ->capture_default_str();
  cmd->add_option("--store-port", o->store_port,
                  "port of metron's store on rank 0 (default: a free one; MASTER_PORT+1 under a\n"
                  "launcher)")
      ->check(integer_in(1, 65535));
  cmd->add_option("--json", o->json, "write the result JSON here");
  cmd->add_option("--trace", o->trace,
                  "write the merged Chrome/Perfetto trace here (gzip for .gz or when over 50 MB)");
  cmd->add_option("--trace-dir", o->trace_dir,
                  "write one Kineto-shaped trace per rank here, rank-<N>.json, for Holistic\n"
                  "Trace Analysis; the folder is created if missing")
      ->type_name("DIR");
  cmd->add_flag("--compare", o->compare,
                "predict the same graph with the simulator and print predicted against measured\n"
                "after the run (as 'metron compare' does for two traces)");
  cmd->add_option("--payload", o->payload,
                  "what the compute tasks run: operations (the cost model's GEMMs and\n"
                  "element-wise ops at their sizes, for timing) or model (a real GPT, its stages\n"
                  "trained by the step's schedule and sync policy (ddp, megatron-ddp,\n"
                  "megatron-distopt) in fp32, each iteration a training step; without a scenario\n"
                  "a 4-layer GPT of hidden 64 on 2 ranks; tp 1 so far)")
      ->check(CLI::IsMember({"operations", "model"}))
      ->capture_default_str();
  cmd->add_flag("--check", o->check,
                "with --payload model: also train the single-process reference (the same model,\n"
                "data and AdamW), print both losses per step and the largest parameter\n"
                "difference, and exit 1 if they differ beyond fp32 tolerance");
  cmd->add_option("--seed", o->seed, "with --payload model: the seed of the parameters and data")
      ->capture_default_str();
  check_integer_options(*cmd);
  cmd->callback([o] { run(*o); });
}

}  // namespace metron::cli
