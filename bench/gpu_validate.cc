// The GPU validation run of issue 19 on one GPU: for a matrix of steps that fit one GPU, the
// iteration time predicted with metron's analytical preset for the GPU, predicted with costs
// measured on this GPU (each distinct operation of the step timed with the CUDA backend's
// payload, as `metron profile --backend cuda` would store them), and measured by running the step
// on the CUDA backend, side by side with the errors. scripts/validate_gpu.sh runs it.
//
//   gpu_validate [-o results.json] [--quick] [--only TEXT] [--skip TEXT] [--trace-dir DIR]
//     --quick: the first two steps only; --only: the steps whose name contains TEXT; --skip:
//     without those whose name contains TEXT; --trace-dir: the first step's per-rank traces
//
// The steps with "fp8" in their name run the layers' linear GEMMs in FP8 (parallel.fp8, Note
// [fp8 training]): the executor runs them as cuBLASLt e4m3 GEMMs after the casts the cost model
// lists, so they check the preset's fp8_gemm_efficiency and the casts' traffic against this GPU.
//
// Only one rank: a run of several ranks needs the launcher and NCCL over several GPUs, which the
// CLI's `metron run --backend cuda` is for. Exits 2 without a GPU or with a GPU metron has no
// preset for.

#include <fmt/format.h>

#include <cmath>
#include <exception>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "gpu_bench_setup.h"
#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/exec/cuda/cuda_compute.h"
#include "metron/exec/cuda/cuda_info.h"
#include "metron/exec/cuda/cuda_run.h"
#include "metron/models/cost_profile.h"
#include "metron/models/hardware_presets.h"
#include "metron/models/model_presets.h"
#include "metron/scenario/evaluation.h"
#include "metron/scenario/step_builder.h"
#include "metron/scenario/world_layout.h"
#include "metron/timelines/kineto_trace.h"
#include "metron/traces/chrome_trace_writer.h"

namespace {

namespace cuda = metron::exec::cuda;
namespace models = metron::models;
namespace scenario = metron::scenario;

struct Case {
  std::string model;
  std::string schedule;
  std::int64_t seq = 0;
  std::int64_t microbatch_size = 1;
  std::int64_t microbatches = 1;
  models::Fp8Recipe fp8 = models::Fp8Recipe::kOff;
};

scenario::Scenario scenario_of(const Case& c, const models::HardwareSpec& hardware) {
  scenario::Scenario s = scenario::default_scenario();
  s.model = models::model_preset(c.model);
  s.hardware = hardware;
  s.gpus.reset();
  s.parallel = {.tp = 1, .pp = 1, .dp = 1, .microbatch_size = c.microbatch_size, .seq_len = c.seq};
  s.parallel.num_microbatches = c.microbatches;
  s.parallel.fp8 = c.fp8;
  s.schedule = {.name = c.schedule};
  return s;
}

std::string name_of(const Case& c) {
  return fmt::format(
      "{} seq {} mbs {} m {} {}{}", c.model, c.seq, c.microbatch_size, c.microbatches, c.schedule,
      c.fp8 == models::Fp8Recipe::kOff ? "" : fmt::format(" fp8 {}", to_string(c.fp8)));
}

/// The measured step's per-rank Kineto-shaped traces in `dir`, as `metron run --trace-dir`
/// writes them, for Holistic Trace Analysis (scripts/hta_check.py).
void write_rank_traces(const scenario::Scenario& s, const scenario::Step& step,
                       const metron::exec::MeasuredStep& measured, const std::string& dir) {
  metron::timelines::Timeline timeline = measured.timeline;
  const metron::sim::TraceOptions options = scenario::trace_options(s, step);
  timeline.static_memory_bytes = options.static_memory_bytes;
  const metron::timelines::WorldLayout layout =
      options.layout ? *options.layout : metron::timelines::graph_world_layout(step.graph);
  const std::vector<metron::traces::TraceDocument> docs = metron::timelines::rank_traces(
      step.graph, timeline, layout,
      {{"source", std::string("measured (gpu_validate, cuda backend)")}});
  std::filesystem::create_directories(dir);
  for (std::size_t r = 0; r < docs.size(); ++r) {
    metron::write_file_atomically(
        (std::filesystem::path(dir) / metron::timelines::rank_trace_file_name(layout.world_rank[r]))
            .string(),
        metron::traces::to_chrome_json(docs[r]));
  }
}

double error_percent(double predicted, double measured) {
  return 100.0 * (predicted - measured) / measured;
}

int run(int argc, char** argv) {
  const std::optional<metron::bench::GpuBench> setup =
      metron::bench::gpu_bench_setup(argc, argv, "gpu_validate", /*need_output=*/false,
                                     /*need_preset=*/true);
  if (!setup) return 2;
  const auto& [output, quick, only, skip, trace_dir, info, device, preset] = *setup;
  // Steps whose activations fit one 80 GB GPU (the executor allocates the graph's buffers, not
  // the model state): the schedule families that run on one rank, GPT and Llama shapes.
  std::vector<Case> cases = {
      {"gpt3-1.3b", "none", 2048, 4, 4},
      {"gpt3-1.3b", "zb-h1", 2048, 4, 4},
      {"gpt3-350m", "none", 2048, 2, 4},
      {"gpt3-2.7b", "1f1b", 2048, 1, 4},
      {"gpt3-6.7b", "1f1b", 2048, 1, 4},
      {"llama2-7b", "none", 4096, 1, 2},
      {"llama3-8b", "1f1b", 2048, 1, 2},
      {"gpt3-13b", "none", 2048, 1, 2},
      {"gpt3-1.3b", "none", 2048, 4, 4, models::Fp8Recipe::kDelayed},
      {"gpt3-6.7b", "1f1b", 2048, 1, 4, models::Fp8Recipe::kDelayed},
      {"llama3-8b", "1f1b", 2048, 1, 2, models::Fp8Recipe::kDelayed},
      {"llama3-8b", "1f1b", 2048, 1, 2, models::Fp8Recipe::kCurrent},
      {"gpt3-13b", "none", 2048, 1, 2, models::Fp8Recipe::kDelayed},
  };
  // Copies: clang 14 cannot capture a structured binding in a lambda.
  const std::string wanted = only;
  const std::string unwanted = skip;
  std::erase_if(cases, [&](const Case& c) {
    const std::string name = name_of(c);
    return name.find(wanted) == std::string::npos ||
           (!unwanted.empty() && name.find(unwanted) != std::string::npos);
  });
  if (quick && cases.size() > 2) cases.resize(2);
  std::cout << fmt::format("{} (preset {}), CUDA runtime {}, driver {}, NCCL {}\n", device,
                           preset->name, info.runtime_version, info.driver_version,
                           info.nccl_version);
  std::cout << fmt::format("{:<40} {:>12} {:>8} {:>12} {:>8} {:>12}\n", "step (1 GPU)", "preset ms",
                           "err %", "profile ms", "err %", "measured ms");
  nlohmann::json rows = nlohmann::json::array();
  int failures = 0;
  for (const Case& c : cases) {
    // One step that fails (too large for this GPU, say) is reported and the others still run.
    try {
      scenario::Scenario s = scenario_of(c, *preset);
      const scenario::Evaluation analytical = scenario::evaluate(s, scenario::Replication::kFull);
      const scenario::Step step =
          scenario::build_step(s, scenario::Replication::kFull, scenario::Payload::kOperations);
      models::CostProfile profile;
      profile.hardware = device + " (measured by gpu_validate on the cuda backend)";
      cuda::profile_operations(metron::exec::distinct_task_operations(step.graph),
                               {.iterations = 5, .warmup = 1}, profile, {});
      s.profile = profile;
      const scenario::Evaluation profiled = scenario::evaluate(s, scenario::Replication::kFull);
      const metron::exec::MeasuredStep measured =
          cuda::run_cuda_single_rank(step.graph, {.iterations = 5, .warmup = 2});
      if (!trace_dir.empty() && &c == &cases.front())
        write_rank_traces(s, step, measured, trace_dir);
      const double measured_s =
          static_cast<double>(
              measured.iteration_ns[static_cast<std::size_t>(measured.median_iteration)]) *
          1e-9;
      std::cout << fmt::format("{:<40} {:>12.2f} {:>+8.1f} {:>12.2f} {:>+8.1f} {:>12.2f}\n",
                               name_of(c), analytical.iteration_time_s * 1e3,
                               error_percent(analytical.iteration_time_s, measured_s),
                               profiled.iteration_time_s * 1e3,
                               error_percent(profiled.iteration_time_s, measured_s),
                               measured_s * 1e3)
                << std::flush;
      rows.push_back(
          {{"step", name_of(c)},
           {"predicted_preset_ms", analytical.iteration_time_s * 1e3},
           {"predicted_profile_ms", profiled.iteration_time_s * 1e3},
           {"measured_ms", measured_s * 1e3},
           {"measured_iterations_ms", measured.iteration_ns},
           {"error_preset_percent", error_percent(analytical.iteration_time_s, measured_s)},
           {"error_profile_percent", error_percent(profiled.iteration_time_s, measured_s)},
           {"profile", nlohmann::json::parse(models::to_json(profile))}});
    } catch (const metron::Error& e) {
      ++failures;
      std::cout << fmt::format("{:<40} failed: {}\n", name_of(c), e.what()) << std::flush;
      rows.push_back({{"step", name_of(c)}, {"error", e.what()}});
    }
  }
  if (!output.empty()) {
    const nlohmann::json doc = {{"gpu", device},
                                {"preset", preset->name},
                                {"cuda_runtime", info.runtime_version},
                                {"cuda_driver", info.driver_version},
                                {"nccl", info.nccl_version},
                                {"steps", rows}};
    metron::write_file_atomically(output, doc.dump(2) + "\n");
    std::cerr << "wrote " << output << "\n";
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "gpu_validate: error: " << e.what() << "\n";
    return 2;
  }
}
