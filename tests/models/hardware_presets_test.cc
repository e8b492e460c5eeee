#include "metron/models/hardware_presets.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "metron/base/error.h"
#include "metron/base/file_io.h"

namespace metron::models {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::ThrowsMessage;

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const HardwareSpec& spec : hardware_presets()) out.push_back(spec.name);
  return out;
}

// The presets taken from datasheets; cpu-local comes from a measurement instead.
std::vector<const HardwareSpec*> datasheet_machines() {
  return {&hardware_preset("dgx-a100"), &hardware_preset("dgx-h100"),
          &hardware_preset("h200-node")};
}

TEST(HardwarePresets, ListsTheDatasheetMachinesThenTheMeasuredOne) {
  EXPECT_THAT(names(), ElementsAre("dgx-a100", "dgx-h100", "h200-node", "cpu-local"));
}

TEST(HardwarePresets, EveryPresetIsValid) {
  for (const HardwareSpec& spec : hardware_presets()) {
    EXPECT_NO_THROW(validate(spec)) << spec.name;
  }
}

TEST(HardwarePresets, EveryPresetRoundTripsThroughJson) {
  for (const HardwareSpec& spec : hardware_presets()) {
    Diagnostics diagnostics;
    EXPECT_EQ(hardware_from_json(to_json(spec), spec.name, &diagnostics), spec) << spec.name;
    EXPECT_TRUE(diagnostics.empty()) << spec.name;
  }
}

// NVIDIA A100 Tensor Core GPU datasheet (80GB SXM) and DGX A100 system architecture.
TEST(HardwarePresets, DgxA100MatchesItsDatasheet) {
  const HardwareSpec& hw = hardware_preset("dgx-a100");
  EXPECT_EQ(hw.gpus_per_node, 8);
  EXPECT_EQ(hw.gpu.peak(Precision::kBf16), 312e12);
  EXPECT_EQ(hw.gpu.peak(Precision::kFp32), 19.5e12);
  EXPECT_EQ(hw.gpu.peak(Precision::kFp8), std::nullopt);  // Ampere has no FP8
  EXPECT_EQ(hw.gpu.hbm_bandwidth, 2.039e12);
  EXPECT_EQ(hw.gpu.hbm_capacity, 80'000'000'000);
  // What NCCL reaches, below the line rates: NVLink3's 600 GB/s bidirectional and HDR 200 Gb/s.
  EXPECT_EQ(hw.intra_node.bandwidth, 232e9);
  EXPECT_LT(hw.intra_node.bandwidth, 600e9 / 2);
  EXPECT_EQ(hw.inter_node.bandwidth, 192e9 / 8);
  EXPECT_LT(hw.inter_node.bandwidth, 200e9 / 8);
}

// NVIDIA H100 Tensor Core GPU datasheet (SXM) and the DGX H100 user guide.
TEST(HardwarePresets, DgxH100MatchesItsDatasheet) {
  const HardwareSpec& hw = hardware_preset("dgx-h100");
  EXPECT_EQ(hw.gpus_per_node, 8);
  EXPECT_EQ(hw.gpu.peak(Precision::kBf16), 989.4e12);
  EXPECT_EQ(hw.gpu.peak(Precision::kFp8), 1978.9e12);
  EXPECT_EQ(hw.gpu.peak(Precision::kFp32), 66.9e12);
  EXPECT_EQ(hw.gpu.hbm_bandwidth, 3.35e12);
  // What NCCL reaches, below NVLink4's 900 GB/s bidirectional and ConnectX-7's 400 Gb/s.
  EXPECT_EQ(hw.intra_node.bandwidth, 370e9);
  EXPECT_LT(hw.intra_node.bandwidth, 900e9 / 2);
  EXPECT_EQ(hw.inter_node.bandwidth, 380e9 / 8);
  EXPECT_LT(hw.inter_node.bandwidth, 400e9 / 8);
  EXPECT_EQ(hw.hardware_queues, 8);
  EXPECT_EQ(hw.compute_slowdown_during_comm, 0.0);
}

// NVIDIA H200 datasheet: H100's compute and fabric, 141 GB of HBM3e at 4.8 TB/s.
TEST(HardwarePresets, H200DiffersFromH100OnlyInMemory) {
  const HardwareSpec& h100 = hardware_preset("dgx-h100");
  HardwareSpec h200 = hardware_preset("h200-node");
  EXPECT_EQ(h200.gpu.hbm_capacity, 141'000'000'000);
  EXPECT_EQ(h200.gpu.hbm_bandwidth, 4.8e12);
  h200.name = h100.name;
  h200.gpu.name = h100.gpu.name;
  h200.gpu.hbm_capacity = h100.gpu.hbm_capacity;
  h200.gpu.hbm_bandwidth = h100.gpu.hbm_bandwidth;
  EXPECT_EQ(h200, h100);
}

// SM counts: NVIDIA A100 and H100 Tensor Core GPU Architecture whitepapers (A100: 108 SMs;
// H100 SXM5: 132 SMs); the H200 is the same GH100 configuration.
TEST(HardwarePresets, SmCountsMatchTheWhitepapers) {
  EXPECT_EQ(hardware_preset("dgx-a100").gpu.sm_count, 108);
  EXPECT_EQ(hardware_preset("dgx-h100").gpu.sm_count, 132);
  EXPECT_EQ(hardware_preset("h200-node").gpu.sm_count, 132);
}

// The efficiencies are round, conservative readings of cuBLAS GEMM and BabelStream/STREAM
// microbenchmarks (sources in hardware_presets.cc), pinned so a change to them is deliberate.
TEST(HardwarePresets, EfficienciesAreRoundMicrobenchmarkReadings) {
  EXPECT_EQ(hardware_preset("dgx-a100").gpu.gemm_efficiency, 0.80);
  EXPECT_EQ(hardware_preset("dgx-h100").gpu.gemm_efficiency, 0.75);
  EXPECT_EQ(hardware_preset("h200-node").gpu.gemm_efficiency, 0.75);  // same compute as H100
  for (const HardwareSpec* spec : datasheet_machines()) {
    EXPECT_EQ(spec->gpu.memory_efficiency, 0.85) << spec->name;
  }
}

TEST(HardwarePresets, LatenciesAreMicrobenchmarkScale) {
  for (const HardwareSpec* spec : datasheet_machines()) {
    EXPECT_EQ(spec->intra_node.latency, 1e-6) << spec->name;
    EXPECT_EQ(spec->inter_node.latency, 5e-6) << spec->name;
    EXPECT_EQ(spec->inter_node.topology, "fat-tree") << spec->name;
  }
}

// cpu-local is compiled in from the measured document; it must be exactly the file's "hardware"
// object (a stale build or a botched embedding would show here), and the file must say how and
// where it was measured: by `metron profile --sweep` (issue 17).
TEST(HardwarePresets, CpuLocalIsTheMeasuredProfileInTheRepository) {
  const std::string path = std::string(METRON_SOURCE_DIR) + "/models/profiles/cpu-local.json";
  const nlohmann::json document = nlohmann::json::parse(read_file(path));
  EXPECT_EQ(hardware_preset("cpu-local"), hardware_from_json(document.at("hardware").dump(), path));
  EXPECT_EQ(hardware_preset("cpu-local"), hardware_from_file_json(read_file(path), path));
  const nlohmann::json& measurement = document.at("measurement");
  EXPECT_THAT(measurement.at("command").get<std::string>(),
              ::testing::StartsWith("metron profile --sweep"));
  EXPECT_TRUE(measurement.contains("date"));
  EXPECT_TRUE(measurement.contains("machine"));
}

// What the sweep asserts about a CPU (Note [hardware sweep]): its peaks are achieved throughput,
// so no efficiency factor and no GPU tile/wave quantization on top; every dtype runs at fp32's
// speed, since the CPU backend computes every dtype in fp32; one node, on the loopback.
TEST(HardwarePresets, CpuLocalPeaksAreMeasuredThroughput) {
  const HardwareSpec& cpu = hardware_preset("cpu-local");
  EXPECT_EQ(cpu.gpu.sm_count, 0);
  EXPECT_EQ(cpu.gpu.gemm_efficiency, 1.0);
  EXPECT_EQ(cpu.gpu.memory_efficiency, 1.0);
  ASSERT_TRUE(cpu.gpu.peak(Precision::kFp32).has_value());
  for (const Precision p : {Precision::kBf16, Precision::kFp16, Precision::kFp8}) {
    EXPECT_EQ(cpu.gpu.peak(p), cpu.gpu.peak(Precision::kFp32)) << to_string(p);
  }
  EXPECT_EQ(cpu.inter_node.topology, "loopback");
  EXPECT_EQ(cpu.inter_node.bandwidth, cpu.intra_node.bandwidth);
  EXPECT_EQ(cpu.inter_node.latency, cpu.intra_node.latency);
  EXPECT_EQ(cpu.hardware_queues, 8);
}

// The names CUDA reported on the GPUs metron was checked on, and the datasheet each maps to.
TEST(HardwarePresets, AGpuNamedByCudaFindsItsDatasheet) {
  EXPECT_EQ(hardware_preset_for_gpu("NVIDIA H100 80GB HBM3")->name, "dgx-h100");
  EXPECT_EQ(hardware_preset_for_gpu("NVIDIA A100-SXM4-80GB")->name, "dgx-a100");
  EXPECT_EQ(hardware_preset_for_gpu("NVIDIA H200")->name, "h200-node");
  EXPECT_FALSE(hardware_preset_for_gpu("NVIDIA GeForce RTX 4090").has_value());
}

TEST(HardwarePresets, UnknownNameListsThePresetsAndSuggestsACloseOne) {
  EXPECT_THAT([] { (void)hardware_preset("dgx-h10"); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "hardware preset: unknown name \"dgx-h10\"; expected one of "
                  "dgx-a100, dgx-h100, h200-node, cpu-local; did you mean \"dgx-h100\"")));
}

TEST(HardwarePresets, UnknownFarNameGetsNoSuggestion) {
  EXPECT_THAT([] { (void)hardware_preset("tpu-v5p"); },
              ThrowsMessage<InvalidConfig>(
                  AllOf(HasSubstr("unknown name \"tpu-v5p\""), Not(HasSubstr("did you mean")))));
}

}  // namespace
}  // namespace metron::models
