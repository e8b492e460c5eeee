// Note [hardware sweep] (profile_sweep.h).

#include "profile_sweep.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "metron/base/error.h"
#include "metron/exec/comm_benchmark.h"
#include "metron/exec/torch_compute.h"
#include "metron/models/comm_cost.h"
#include "metron/models/hardware_spec.h"
#include "output_files.h"
#include "profile_communication.h"

namespace metron::cli {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

/// `from`, `from`·`factor`, ... up to `most`; just `most` when `from` is larger.
std::vector<std::int64_t> grid(std::int64_t from, std::int64_t factor, std::int64_t most) {
  std::vector<std::int64_t> out;
  for (std::int64_t v = std::min(from, most); v <= most; v *= factor) out.push_back(v);
  return out;
}

/// 4 significant digits: the spec states what was measured, not the noise below it.
double rounded(double value) { return std::stod(fmt::format("{:.4g}", value)); }

/// The median time of `compute` after the warm-up, publishing `what` for the watchdog.
double median_time(exec::TorchCompute& torch, const ir::Compute& compute, const SweepOptions& o,
                   const exec::BenchmarkStatus& status, const std::string& what) {
  status(what);
  torch.prepare(compute);
  std::vector<double> seconds;
  for (std::int32_t rep = -o.warmup; rep < o.repetitions; ++rep) {
    const Clock::time_point start = Clock::now();
    torch.run(compute);
    if (rep >= 0) seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  return exec::median_seconds(std::move(seconds));
}

ir::Compute gemm(std::int64_t n) {
  return {.operations = {{.name = "sweep-gemm",
                          .kind = ir::OperationKind::kGemm,
                          .m = n,
                          .n = n,
                          .k = n,
                          .dtype = ir::DType::kFp32}}};
}

ir::Compute add(std::int64_t elements) {
  return {.operations = {{.name = "add",
                          .kind = ir::OperationKind::kElementwise,
                          .m = elements,
                          .bytes = 12 * elements,
                          .dtype = ir::DType::kFp32}}};
}

/// The best GFLOP/s over the GEMM grid (FLOP/s), with every point in `points`.
double gemm_peak(exec::TorchCompute& torch, const SweepOptions& o,
                 const exec::BenchmarkStatus& status, Json& points) {
  double best = 0;
  for (const std::int64_t n : grid(256, 2, o.gemm_max)) {
    const double seconds =
        median_time(torch, gemm(n), o, status, fmt::format("sweep: fp32 GEMM n = {}", n));
    const double flops = 2.0 * std::pow(static_cast<double>(n), 3) / seconds;
    best = std::max(best, flops);
    points.push_back({{"n", n}, {"seconds", seconds}, {"gflops", flops / 1e9}});
    std::cerr << fmt::format("metron profile --sweep: fp32 GEMM {}³: {:.3f} ms, {:.1f} GFLOP/s\n",
                             n, seconds * 1e3, flops / 1e9);
  }
  return best;
}

/// The best bytes/s over the add grid, counted as the cost model counts them (12 per element).
double add_bandwidth(exec::TorchCompute& torch, const SweepOptions& o,
                     const exec::BenchmarkStatus& status, Json& points) {
  double best = 0;
  for (const std::int64_t n : grid(std::int64_t{1} << 20, 4, o.add_max)) {
    const double seconds =
        median_time(torch, add(n), o, status, fmt::format("sweep: fp32 add of {} elements", n));
    const double bandwidth = 12.0 * static_cast<double>(n) / seconds;
    best = std::max(best, bandwidth);
    points.push_back(
        {{"elements", n}, {"bytes", 12 * n}, {"seconds", seconds}, {"gb_per_s", bandwidth / 1e9}});
    std::cerr << fmt::format(
        "metron profile --sweep: fp32 add of {} elements: {:.3f} ms, {:.2f} "
        "GB/s\n",
        n, seconds * 1e3, bandwidth / 1e9);
  }
  return best;
}

std::int64_t physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) throw BackendError("sweep: sysconf cannot tell the memory size");
  return std::int64_t{pages} * std::int64_t{page};
}

std::int64_t cores() { return std::max<long>(1, ::sysconf(_SC_NPROCESSORS_ONLN)); }

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("model name")) {
      const std::size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  }
  return "unknown CPU";
}

std::string host_name() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return "?";
  return name.data();
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  std::array<char, 16> text{};
  const std::size_t n = std::strftime(text.data(), text.size(), "%Y-%m-%d", &utc);
  return {text.data(), n};
}

/// The all-reduce grid's samples, and the link the ring formula fits to them.
models::Link fitted_link(const exec::CommBenchmark& b, const exec::CommMeasurement& m) {
  std::vector<models::CommSample> samples;
  for (std::size_t i = 0; i < b.collectives.size(); ++i) {
    samples.push_back({b.collectives[i].call.bytes, m.collective_seconds[i]});
  }
  try {
    return models::fit_ring_link(models::CommOp::kAllReduce, 2, samples);
  } catch (const InvalidConfig& e) {
    // The grid is ours, so a failed fit is what the machine measured, not the user's input.
    throw BackendError(std::string("sweep: ") + e.what());
  }
}

models::HardwareSpec hardware_of(double peak, double bandwidth, const models::Link& link,
                                 const exec::SlowdownMeasurement& slowdown) {
  models::HardwareSpec hw;
  hw.name = "cpu-local";
  hw.gpu.name = fmt::format("{} ({} cores, libtorch {})", cpu_model(), cores(),
                            exec::TorchCompute::library_version());
  for (const models::Precision p : {models::Precision::kBf16, models::Precision::kFp16,
                                    models::Precision::kFp32, models::Precision::kFp8}) {
    hw.gpu.peak_flops[p] = rounded(peak);
  }
  hw.gpu.hbm_bandwidth = rounded(bandwidth);
  hw.gpu.hbm_capacity = physical_memory();
  hw.gpus_per_node = cores();
  hw.intra_node = {.bandwidth = rounded(link.bandwidth), .latency = rounded(link.latency)};
  hw.inter_node = {.bandwidth = hw.intra_node.bandwidth,
                   .latency = hw.intra_node.latency,
                   .topology = "loopback"};
  hw.compute_slowdown_during_comm = rounded(slowdown.slowdown);
  hw.comm_slowdown_during_compute = rounded(slowdown.comm_slowdown);
  models::validate(hw);
  return hw;
}

/// Rank 0's part after the communication: the compute grids, the fit, the document.
void finish(const SweepOptions& o, const exec::CommBenchmark& b, const exec::CommMeasurement& m,
            const exec::BenchmarkStatus& status) {
  exec::TorchCompute torch({.intra_op_threads = o.threads});
  Json gemm_points = Json::array();
  Json add_points = Json::array();
  const double peak = gemm_peak(torch, o, status, gemm_points);
  const double bandwidth = add_bandwidth(torch, o, status, add_points);
  const models::Link link = fitted_link(b, m);
  const exec::SlowdownMeasurement& slowdown = *m.slowdown;
  const models::HardwareSpec hw = hardware_of(peak, bandwidth, link, slowdown);
  const models::CommModel model(hw);
  Json all_reduce = Json::array();
  for (std::size_t i = 0; i < b.collectives.size(); ++i) {
    const std::int64_t bytes = b.collectives[i].call.bytes;
    all_reduce.push_back(
        {{"bytes", bytes},
         {"measured_s", m.collective_seconds[i]},
         {"model_s", model.collective_time(models::CommOp::kAllReduce, bytes, {.ranks = 2})}});
  }
  const std::int64_t slowdown_n = std::min<std::int64_t>(1024, o.gemm_max);
  Json document;
  document["hardware"] = Json::parse(models::to_json(hw));
  document["measurement"] = {
      {"command", o.command},
      {"date", today()},
      {"machine", fmt::format("{} {}, {} cores", host_name(), cpu_model(), cores())},
      {"torch", std::string(exec::TorchCompute::library_version())},
      {"compute_dtype",
       "fp32: every dtype's peak is fp32's, since the CPU backend runs every dtype in fp32"},
      {"threads", o.threads},
      {"warmup", o.warmup},
      {"repetitions", o.repetitions},
      {"gemm_fp32", gemm_points},
      {"add_fp32", add_points},
      {"all_reduce_2_processes", all_reduce},
      {"compute_slowdown",
       {{"gemm", fmt::format("{0}x{0}x{0} fp32", slowdown_n)},
        {"all_reduce_bytes", std::get<exec::CollectiveProbe>(b.slowdown->load).call.bytes},
        {"alone_s", slowdown.alone_seconds},
        {"with_comm_s", slowdown.with_comm_seconds},
        {"all_reduces_meanwhile", slowdown.load_rounds},
        {"all_reduce_alone_s", slowdown.comm_alone_seconds},
        {"all_reduce_with_compute_s", slowdown.comm_with_compute_seconds}}}};
  write_outputs({{o.output, document.dump(2) + "\n"}}, {});
  std::cout << fmt::format(
      "metron profile --sweep: this machine -> {}\n"
      "  peak (fp32, every dtype)   {:.1f} GFLOP/s\n"
      "  element-wise bandwidth     {:.2f} GB/s\n"
      "  link (2 processes, Gloo)   latency {:.1f} us, bandwidth {:.3f} GB/s\n"
      "  compute slow-down          {:.3f} while communicating\n"
      "  communication slow-down    {:.3f} while computing\n"
      "  use it: metron simulate ... --hardware {}\n",
      o.output, hw.gpu.peak_flops.at(models::Precision::kFp32) / 1e9, hw.gpu.hbm_bandwidth / 1e9,
      hw.intra_node.latency * 1e6, hw.intra_node.bandwidth / 1e9, hw.compute_slowdown_during_comm,
      hw.comm_slowdown_during_compute, o.output);
}

}  // namespace

void run_sweep(const SweepOptions& o) {
  check_outputs({{"--output", o.output}});
  exec::CommBenchmark b{.groups = {{0, 1}},
                        .warmup = o.warmup,
                        .repetitions = o.repetitions,
                        .intra_op_threads = o.threads};
  for (const std::int64_t bytes : grid(4, 4, o.message_max)) {
    b.collectives.push_back(
        {.group = 0, .call = {.op = ir::CollectiveOp::kAllReduce, .bytes = bytes}});
  }
  if (b.collectives.size() < 2) {
    throw InvalidConfig(fmt::format(
        "--sweep-message-max {}: the all-reduce grid (4 B, 16 B, ...) needs at least 2 sizes to "
        "fit a latency and a bandwidth; expected at least 16",
        o.message_max));
  }
  b.slowdown = exec::SlowdownProbe{.compute = gemm(std::min<std::int64_t>(1024, o.gemm_max)),
                                   .load = b.collectives.back(),
                                   .min_seconds = o.slowdown_seconds};
  std::cerr << fmt::format(
      "metron profile --sweep: {} all-reduce sizes between 2 processes, the compute slow-down, "
      "{} GEMM sizes, {} add sizes ({} warm-up and {} timed runs each)\n",
      b.collectives.size(), grid(256, 2, o.gemm_max).size(),
      grid(std::int64_t{1} << 20, 4, o.add_max).size(), o.warmup, o.repetitions);
  launch_benchmark(b, 2, o.timeout,
                   [&](const exec::CommMeasurement& m, const exec::BenchmarkStatus& status) {
                     finish(o, b, m, status);
                   });
}

}  // namespace metron::cli
