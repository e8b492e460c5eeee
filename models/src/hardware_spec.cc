// HardwareSpec: validation and the JSON form (Note [hardware JSON]).

#include "metron/models/hardware_spec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "json_reading.h"
#include "metron/base/error.h"
#include "spec_checks.h"

namespace metron::models {
namespace {

// ordered_json keeps keys in insertion order (canonical output) and in document order when
// reading, so unknown keys are reported in the order they appear.
using detail::brief;
using detail::check_non_negative;
using detail::check_positive;
using detail::fail;
using detail::Json;
using detail::number_text;
using detail::ObjectReader;
using detail::read_non_negative_integer;
using detail::read_non_negative_number;
using detail::read_positive_integer;
using detail::read_positive_number;
using detail::read_string;

// An efficiency is a fraction of a datasheet figure: above 1 would beat the datasheet, 0 would
// make every op take forever.
void check_fraction(std::vector<std::string>& problems, const std::string& key, double value) {
  if (!(value > 0 && value <= 1)) {
    problems.push_back(key + ": expected a number in (0, 1], got " + number_text(value));
  }
}

double read_fraction(const Json& v, const std::string& path) {
  if (!v.is_number() || !(v.get<double>() > 0 && v.get<double>() <= 1)) {
    fail(path, "expected a number in (0, 1], got " + brief(v));
  }
  return v.get<double>();
}

void check_attention_table(std::vector<std::string>& problems, const AttentionKernelTable& t) {
  const std::string key = "gpu.fused_attention";
  const std::size_t n = t.seq_lens.size();
  if (n == 0 || t.forward.size() != n || t.backward.size() != n) {
    problems.push_back(key +
                       ": expected seq_lens, forward and backward of one equal, non-zero "
                       "length, got " +
                       std::to_string(n) + ", " + std::to_string(t.forward.size()) + " and " +
                       std::to_string(t.backward.size()));
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const std::string at = "[" + std::to_string(i) + "]";
    check_positive(problems, key + ".seq_lens" + at, t.seq_lens[i]);
    check_positive(problems, key + ".forward" + at, t.forward[i]);
    check_positive(problems, key + ".backward" + at, t.backward[i]);
    if (i > 0 && !(t.seq_lens[i] > t.seq_lens[i - 1])) {
      problems.push_back(key + ".seq_lens: expected ascending lengths, got " +
                         number_text(t.seq_lens[i - 1]) + " then " + number_text(t.seq_lens[i]));
    }
  }
}

void check_size_efficiency(std::vector<std::string>& problems, const std::string& key,
                           const std::optional<SizeEfficiency>& curve) {
  if (!curve) return;
  const std::size_t n = curve->bytes.size();
  if (n == 0 || curve->fraction.size() != n) {
    problems.push_back(key + ": expected bytes and fraction of one equal, non-zero length, got " +
                       std::to_string(n) + " and " + std::to_string(curve->fraction.size()));
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const std::string at = "[" + std::to_string(i) + "]";
    check_positive(problems, key + ".bytes" + at, curve->bytes[i]);
    check_fraction(problems, key + ".fraction" + at, curve->fraction[i]);
    if (i > 0 && !(curve->bytes[i] > curve->bytes[i - 1])) {
      problems.push_back(key + ".bytes: expected ascending sizes, got " +
                         number_text(curve->bytes[i - 1]) + " then " +
                         number_text(curve->bytes[i]));
    }
  }
}

// The fixed times per GEMM output tile and per kernel: a millisecond is a thousand times any
// GPU's (H100: 1.1 us per tile, 3.4 us per kernel); the bound keeps a GEMM's efficiency,
// k / (k + k0), from rounding to zero.
constexpr double kMaxFixedTime = 1e-3;

constexpr Precision kPrecisions[] = {Precision::kBf16, Precision::kFp16, Precision::kFp32,
                                     Precision::kFp8};

std::vector<std::string> find_problems(const HardwareSpec& spec) {
  std::vector<std::string> problems;
  if (spec.gpu.peak_flops.empty()) {
    problems.push_back("gpu.peak_flops: expected a peak for at least one precision, got none");
  }
  for (const auto& [precision, flops] : spec.gpu.peak_flops) {
    check_positive(problems, "gpu.peak_flops." + std::string(to_string(precision)), flops);
  }
  check_positive(problems, "gpu.hbm_bandwidth", spec.gpu.hbm_bandwidth);
  check_positive(problems, "gpu.hbm_capacity", spec.gpu.hbm_capacity);
  if (spec.gpu.sm_count < 0) {
    problems.push_back("gpu.sm_count: expected an integer >= 0, got " +
                       std::to_string(spec.gpu.sm_count));
  }
  check_fraction(problems, "gpu.gemm_efficiency", spec.gpu.gemm_efficiency);
  check_fraction(problems, "gpu.memory_efficiency", spec.gpu.memory_efficiency);
  if (spec.gpu.fp8_gemm_efficiency) {
    check_fraction(problems, "gpu.fp8_gemm_efficiency", *spec.gpu.fp8_gemm_efficiency);
  }
  for (const auto& [name, seconds] :
       {std::pair{"gpu.gemm_tile_overhead", spec.gpu.gemm_tile_overhead},
        std::pair{"gpu.kernel_floor", spec.gpu.kernel_floor},
        std::pair{"gpu.gemm_floor", spec.gpu.gemm_floor}}) {
    if (!(seconds >= 0 && seconds <= kMaxFixedTime)) {
      problems.push_back(std::string(name) + ": expected seconds in [0, 0.001], got " +
                         number_text(seconds));
    }
  }
  if (spec.gpu.fused_attention) check_attention_table(problems, *spec.gpu.fused_attention);
  check_positive(problems, "gpus_per_node", spec.gpus_per_node);
  check_positive(problems, "intra_node.bandwidth", spec.intra_node.bandwidth);
  check_non_negative(problems, "intra_node.latency", spec.intra_node.latency);
  check_size_efficiency(problems, "intra_node.size_efficiency", spec.intra_node.size_efficiency);
  check_positive(problems, "inter_node.bandwidth", spec.inter_node.bandwidth);
  check_non_negative(problems, "inter_node.latency", spec.inter_node.latency);
  check_size_efficiency(problems, "inter_node.size_efficiency", spec.inter_node.size_efficiency);
  if (spec.inter_node.topology.empty()) {
    problems.push_back("inter_node.topology: expected a non-empty name, got \"\"");
  }
  if (const std::string& cpu = spec.inter_node.nccl_host_cpu;
      !cpu.empty() && cpu != "intel" && cpu != "amd") {
    problems.push_back("inter_node.nccl_host_cpu: expected \"intel\" or \"amd\", got \"" + cpu +
                       "\"");
  }
  check_positive(problems, "hardware_queues", spec.hardware_queues);
  check_non_negative(problems, "compute_slowdown_during_comm", spec.compute_slowdown_during_comm);
  check_non_negative(problems, "comm_slowdown_during_compute", spec.comm_slowdown_during_compute);
  return problems;
}

// Every key must be a precision: a typo here would silently drop a peak.
std::map<Precision, double> read_peak_flops(const Json& v, const std::string& path) {
  if (!v.is_object()) fail(path, "expected an object, got " + brief(v));
  std::map<Precision, double> peaks;
  for (const auto& item : v.items()) {
    const std::optional<Precision> precision = parse_precision(item.key());
    if (!precision) {
      fail(path,
           "expected precisions \"bf16\", \"fp16\", \"fp32\", \"fp8\", got \"" + item.key() + "\"");
    }
    peaks[*precision] = read_positive_number(item.value(), path + "." + item.key());
  }
  if (peaks.empty()) fail(path, "expected a peak for at least one precision, got {}");
  return peaks;
}

std::vector<double> read_positive_numbers(const Json& v, const std::string& path) {
  if (!v.is_array()) fail(path, "expected a list of positive numbers, got " + brief(v));
  std::vector<double> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    out.push_back(read_positive_number(v[i], path + "[" + std::to_string(i) + "]"));
  }
  return out;
}

AttentionKernelTable read_attention_table(const Json& v, const std::string& path,
                                          Diagnostics* diagnostics) {
  ObjectReader in(v, path, diagnostics);
  AttentionKernelTable t;
  t.kernel = read_string(in.required("kernel"), in.path_of("kernel"));
  t.seq_lens = read_positive_numbers(in.required("seq_lens"), in.path_of("seq_lens"));
  t.forward = read_positive_numbers(in.required("forward"), in.path_of("forward"));
  t.backward = read_positive_numbers(in.required("backward"), in.path_of("backward"));
  in.finish();
  return t;
}

GpuSpec read_gpu(const Json& v, const std::string& path, Diagnostics* diagnostics) {
  ObjectReader in(v, path, diagnostics);
  GpuSpec gpu;
  gpu.name = read_string(in.required("name"), in.path_of("name"));
  gpu.peak_flops = read_peak_flops(in.required("peak_flops"), in.path_of("peak_flops"));
  gpu.hbm_bandwidth =
      read_positive_number(in.required("hbm_bandwidth"), in.path_of("hbm_bandwidth"));
  gpu.hbm_capacity = read_positive_integer(in.required("hbm_capacity"), in.path_of("hbm_capacity"));
  if (const Json* sm_count = in.find("sm_count")) {
    gpu.sm_count = read_non_negative_integer(*sm_count, in.path_of("sm_count"));
  }
  if (const Json* efficiency = in.find("gemm_efficiency")) {
    gpu.gemm_efficiency = read_fraction(*efficiency, in.path_of("gemm_efficiency"));
  }
  if (const Json* efficiency = in.find("memory_efficiency")) {
    gpu.memory_efficiency = read_fraction(*efficiency, in.path_of("memory_efficiency"));
  }
  if (const Json* efficiency = in.find("fp8_gemm_efficiency")) {
    gpu.fp8_gemm_efficiency = read_fraction(*efficiency, in.path_of("fp8_gemm_efficiency"));
  }
  if (const Json* overhead = in.find("gemm_tile_overhead")) {
    gpu.gemm_tile_overhead = read_non_negative_number(*overhead, in.path_of("gemm_tile_overhead"));
  }
  if (const Json* floor = in.find("kernel_floor")) {
    gpu.kernel_floor = read_non_negative_number(*floor, in.path_of("kernel_floor"));
  }
  if (const Json* floor = in.find("gemm_floor")) {
    gpu.gemm_floor = read_non_negative_number(*floor, in.path_of("gemm_floor"));
  }
  if (const Json* table = in.find("fused_attention")) {
    gpu.fused_attention = read_attention_table(*table, in.path_of("fused_attention"), diagnostics);
  }
  in.finish();
  return gpu;
}

SizeEfficiency read_size_efficiency(const Json& v, const std::string& path,
                                    Diagnostics* diagnostics) {
  ObjectReader in(v, path, diagnostics);
  SizeEfficiency curve;
  curve.bytes = read_positive_numbers(in.required("bytes"), in.path_of("bytes"));
  const std::string fraction_path = in.path_of("fraction");
  const Json& fractions = in.required("fraction");
  if (!fractions.is_array())
    fail(fraction_path, "expected a list of numbers in (0, 1], got " + brief(fractions));
  for (std::size_t i = 0; i < fractions.size(); ++i) {
    curve.fraction.push_back(
        read_fraction(fractions[i], fraction_path + "[" + std::to_string(i) + "]"));
  }
  in.finish();
  return curve;
}

IntraNodeFabric read_intra_node(const Json& v, const std::string& path, Diagnostics* diagnostics) {
  ObjectReader in(v, path, diagnostics);
  IntraNodeFabric fabric;
  fabric.bandwidth = read_positive_number(in.required("bandwidth"), in.path_of("bandwidth"));
  fabric.latency = read_non_negative_number(in.required("latency"), in.path_of("latency"));
  if (const Json* curve = in.find("size_efficiency")) {
    fabric.size_efficiency =
        read_size_efficiency(*curve, in.path_of("size_efficiency"), diagnostics);
  }
  in.finish();
  return fabric;
}

InterNodeNetwork read_inter_node(const Json& v, const std::string& path, Diagnostics* diagnostics) {
  ObjectReader in(v, path, diagnostics);
  InterNodeNetwork network;
  network.bandwidth = read_positive_number(in.required("bandwidth"), in.path_of("bandwidth"));
  network.latency = read_non_negative_number(in.required("latency"), in.path_of("latency"));
  network.topology = read_string(in.required("topology"), in.path_of("topology"));
  if (const Json* cpu = in.find("nccl_host_cpu")) {
    network.nccl_host_cpu = read_string(*cpu, in.path_of("nccl_host_cpu"));
  }
  if (const Json* curve = in.find("size_efficiency")) {
    network.size_efficiency =
        read_size_efficiency(*curve, in.path_of("size_efficiency"), diagnostics);
  }
  in.finish();
  return network;
}

HardwareSpec read_spec(const Json& root, const std::string& path, Diagnostics* diagnostics) {
  ObjectReader in(root, path, diagnostics);
  HardwareSpec spec;
  spec.name = read_string(in.required("name"), in.path_of("name"));
  spec.gpu = read_gpu(in.required("gpu"), in.path_of("gpu"), diagnostics);
  spec.gpus_per_node =
      read_positive_integer(in.required("gpus_per_node"), in.path_of("gpus_per_node"));
  spec.intra_node =
      read_intra_node(in.required("intra_node"), in.path_of("intra_node"), diagnostics);
  spec.inter_node =
      read_inter_node(in.required("inter_node"), in.path_of("inter_node"), diagnostics);
  if (const Json* v = in.find("hardware_queues")) {
    spec.hardware_queues = read_positive_integer(*v, in.path_of("hardware_queues"));
  }
  if (const Json* v = in.find("compute_slowdown_during_comm")) {
    spec.compute_slowdown_during_comm =
        read_non_negative_number(*v, in.path_of("compute_slowdown_during_comm"));
  }
  if (const Json* v = in.find("comm_slowdown_during_compute")) {
    spec.comm_slowdown_during_compute =
        read_non_negative_number(*v, "comm_slowdown_during_compute");
  }
  in.finish();
  return spec;
}

// Note [measured hardware]: {"hardware": spec, "measurement": {...}}; the measurement is free
// text for people (how, where and when the spec was measured) and is not read.
HardwareSpec read_measured(const Json& root, Diagnostics* diagnostics) {
  ObjectReader in(root, "", diagnostics);
  const Json& hardware = in.required("hardware");
  if (const Json* v = in.find("measurement"); v != nullptr && !v->is_object()) {
    fail("measurement", "expected an object, got " + brief(*v));
  }
  in.finish();
  return read_spec(hardware, "hardware", diagnostics);
}

}  // namespace

double interpolate_in_log(const std::vector<double>& xs, const std::vector<double>& ys, double x) {
  if (x <= xs.front()) return ys.front();
  if (x >= xs.back()) return ys.back();
  const auto upper = static_cast<std::size_t>(std::ranges::upper_bound(xs, x) - xs.begin());
  const std::size_t lower = upper - 1;
  const double t = std::log(x / xs[lower]) / std::log(xs[upper] / xs[lower]);
  return ys[lower] + t * (ys[upper] - ys[lower]);
}

void validate(const HardwareSpec& spec) {
  detail::throw_if_problems("invalid hardware \"" + spec.name + "\"", find_problems(spec));
}

std::string to_json(const HardwareSpec& spec) {
  Json peaks = Json::object();
  for (Precision precision : kPrecisions) {
    if (const std::optional<double> flops = spec.gpu.peak(precision)) {
      peaks[std::string(to_string(precision))] = *flops;
    }
  }
  Json gpu = {{"name", spec.gpu.name},
              {"peak_flops", peaks},
              {"hbm_bandwidth", spec.gpu.hbm_bandwidth},
              {"hbm_capacity", spec.gpu.hbm_capacity},
              {"sm_count", spec.gpu.sm_count},
              {"gemm_efficiency", spec.gpu.gemm_efficiency},
              {"memory_efficiency", spec.gpu.memory_efficiency}};
  if (const auto& e = spec.gpu.fp8_gemm_efficiency) gpu["fp8_gemm_efficiency"] = *e;
  if (spec.gpu.gemm_tile_overhead > 0) gpu["gemm_tile_overhead"] = spec.gpu.gemm_tile_overhead;
  if (spec.gpu.kernel_floor > 0) gpu["kernel_floor"] = spec.gpu.kernel_floor;
  if (spec.gpu.gemm_floor > 0) gpu["gemm_floor"] = spec.gpu.gemm_floor;
  if (const auto& t = spec.gpu.fused_attention) {
    gpu["fused_attention"] = {{"kernel", t->kernel},
                              {"seq_lens", t->seq_lens},
                              {"forward", t->forward},
                              {"backward", t->backward}};
  }
  Json intra = {{"bandwidth", spec.intra_node.bandwidth}, {"latency", spec.intra_node.latency}};
  if (const auto& c = spec.intra_node.size_efficiency) {
    intra["size_efficiency"] = {{"bytes", c->bytes}, {"fraction", c->fraction}};
  }
  Json inter = {{"bandwidth", spec.inter_node.bandwidth},
                {"latency", spec.inter_node.latency},
                {"topology", spec.inter_node.topology}};
  if (const auto& c = spec.inter_node.size_efficiency) {
    inter["size_efficiency"] = {{"bytes", c->bytes}, {"fraction", c->fraction}};
  }
  if (!spec.inter_node.nccl_host_cpu.empty())
    inter["nccl_host_cpu"] = spec.inter_node.nccl_host_cpu;
  const Json out = {{"name", spec.name},
                    {"gpu", gpu},
                    {"gpus_per_node", spec.gpus_per_node},
                    {"intra_node", intra},
                    {"inter_node", inter},
                    {"hardware_queues", spec.hardware_queues},
                    {"compute_slowdown_during_comm", spec.compute_slowdown_during_comm},
                    {"comm_slowdown_during_compute", spec.comm_slowdown_during_compute}};
  return detail::dump_line(out, "hardware \"" + spec.name + "\"");
}

HardwareSpec hardware_from_json(std::string_view text, const std::string& source,
                                Diagnostics* diagnostics) {
  HardwareSpec spec = detail::read_document(
      text, source, [&](const Json& root) { return read_spec(root, "", diagnostics); });
  validate(spec);
  return spec;
}

HardwareSpec hardware_from_file_json(std::string_view text, const std::string& source,
                                     Diagnostics* diagnostics) {
  HardwareSpec spec = detail::read_document(text, source, [&](const Json& root) {
    // A bare spec names itself; the measured document holds one under "hardware".
    const bool measured = root.is_object() && root.contains("hardware") && !root.contains("name");
    return measured ? read_measured(root, diagnostics) : read_spec(root, "", diagnostics);
  });
  validate(spec);
  return spec;
}

}  // namespace metron::models
