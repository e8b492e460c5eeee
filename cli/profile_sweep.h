#pragma once
// `metron profile --sweep` (issue 17): measures this machine, not a graph, with the executor's
// own payload and communication, and writes a hardware spec that can serve as a preset
// (models/profiles/cpu-local.json is one). Note [hardware sweep]:
//
//   peak_flops     the best throughput (2·n³ / median time) of square fp32 GEMMs, n = 256, 512,
//                  ... up to --sweep-gemm-max, through exec::TorchCompute. Every dtype gets it:
//                  the CPU backend runs every dtype in fp32 (Note [torch compute]), so an op of
//                  any dtype runs at fp32's speed here.
//   hbm_bandwidth  the best 12·N / median time of fp32 adds of N elements, N = 2^20, 2^22, ...
//                  up to --sweep-add-max: the bytes the cost model counts for an element-wise op
//                  (Note [torch compute]).
//   intra_node     α and β of all-reduces between 2 local processes over Gloo, messages of 4 B,
//                  16 B, ... up to --sweep-message-max: the least-squares fit of the ring time the
//                  communication model prices for 2 ranks, 2α + S/β, in relative error
//                  (models::fit_ring_link), so the model gives the measured times back.
//   inter_node     the same link: a local run has one node ("loopback").
//   compute_slowdown_during_comm
//                  a fp32 GEMM of n = min(1024, --sweep-gemm-max) alone and while the largest
//                  all-reduce runs back to back on a second thread and on the other process
//                  (Note [communication benchmark]).
//   hbm_capacity   physical memory (sysconf); gpus_per_node the online cores; hardware_queues 8;
//                  sm_count 0, gemm_efficiency and memory_efficiency 1 (the peaks are what the
//                  kernels reached).
//
// Every figure is the median of --repetitions after --warmup (the slow-down's two over at least
// --slowdown-seconds each), rounded to 4 significant digits in the spec; the document's
// "measurement" keeps every grid point at full precision, with the model's time for each all-reduce
// next to the measured one.

#include <chrono>
#include <cstdint>
#include <string>

namespace metron::cli {

/// What the sweep measures and where it writes.
struct SweepOptions {
  std::string output;
  std::string command;  ///< the command line, recorded in the document
  std::int32_t warmup = 1;
  std::int32_t repetitions = 5;
  std::int32_t threads = 1;  ///< libtorch threads (the executor's per-rank default)
  std::chrono::milliseconds timeout{120000};
  double slowdown_seconds = 1.0;                      ///< exec::SlowdownProbe::min_seconds
  std::int64_t gemm_max = 2048;                       ///< n of the largest GEMM
  std::int64_t add_max = std::int64_t{1} << 24;       ///< elements of the largest add
  std::int64_t message_max = std::int64_t{64} << 20;  ///< bytes of the largest all-reduce
};

/// Runs the sweep (Note [hardware sweep]) in 2 forked processes and writes the document
/// {"hardware": spec, "measurement": {...}} to `options.output` atomically. Throws InvalidConfig
/// for bad options, BackendError when a measurement fails or gives no fit.
void run_sweep(const SweepOptions& options);

}  // namespace metron::cli
