#include "metron/models/hardware_presets.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "metron/base/error.h"

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

TEST(HardwarePresets, ListsTheDatasheetMachinesInOrder) {
  EXPECT_THAT(names(), ElementsAre("dgx-a100", "dgx-h100", "h200-node"));
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
  EXPECT_EQ(hw.intra_node.bandwidth, 600e9 / 2);  // NVLink3 600 GB/s bidirectional
  EXPECT_EQ(hw.inter_node.bandwidth, 200e9 / 8);  // HDR 200 Gb/s
}

// NVIDIA H100 Tensor Core GPU datasheet (SXM) and the DGX H100 user guide.
TEST(HardwarePresets, DgxH100MatchesItsDatasheet) {
  const HardwareSpec& hw = hardware_preset("dgx-h100");
  EXPECT_EQ(hw.gpus_per_node, 8);
  EXPECT_EQ(hw.gpu.peak(Precision::kBf16), 989.4e12);
  EXPECT_EQ(hw.gpu.peak(Precision::kFp8), 1978.9e12);
  EXPECT_EQ(hw.gpu.peak(Precision::kFp32), 66.9e12);
  EXPECT_EQ(hw.gpu.hbm_bandwidth, 3.35e12);
  EXPECT_EQ(hw.intra_node.bandwidth, 900e9 / 2);  // NVLink4 900 GB/s bidirectional
  EXPECT_EQ(hw.inter_node.bandwidth, 400e9 / 8);  // ConnectX-7 400 Gb/s
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

TEST(HardwarePresets, LatenciesAreMicrobenchmarkScale) {
  for (const HardwareSpec& spec : hardware_presets()) {
    EXPECT_EQ(spec.intra_node.latency, 1e-6) << spec.name;
    EXPECT_EQ(spec.inter_node.latency, 5e-6) << spec.name;
    EXPECT_EQ(spec.inter_node.topology, "fat-tree") << spec.name;
  }
}

TEST(HardwarePresets, UnknownNameListsThePresetsAndSuggestsACloseOne) {
  EXPECT_THAT([] { (void)hardware_preset("dgx-h10"); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("hardware preset: unknown name \"dgx-h10\"; expected one of "
                            "dgx-a100, dgx-h100, h200-node; did you mean \"dgx-h100\"")));
}

TEST(HardwarePresets, UnknownFarNameGetsNoSuggestion) {
  EXPECT_THAT([] { (void)hardware_preset("cpu-local"); },
              ThrowsMessage<InvalidConfig>(
                  AllOf(HasSubstr("unknown name \"cpu-local\""), Not(HasSubstr("did you mean")))));
}

}  // namespace
}  // namespace metron::models
