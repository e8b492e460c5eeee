#include "metron/models/hardware_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "metron/base/diagnostics.h"
#include "metron/base/error.h"
#include "metron/models/hardware_presets.h"

namespace metron::models {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::ThrowsMessage;
using ::testing::UnorderedElementsAre;

HardwareSpec small() {
  return {.name = "small",
          .gpu = {.name = "toy",
                  .peak_flops = {{Precision::kBf16, 100}, {Precision::kFp32, 25}},
                  .hbm_bandwidth = 10,
                  .hbm_capacity = 1000},
          .gpus_per_node = 2,
          .intra_node = {.bandwidth = 5, .latency = 0.5},
          .inter_node = {.bandwidth = 1, .latency = 2, .topology = "ring"}};
}

// The required keys of small(), as JSON; `extra` adds or overrides top-level keys.
std::string json_with(const std::string& extra) {
  return R"({"name":"small","gpu":{"name":"toy","peak_flops":{"bf16":100,"fp32":25},)"
         R"("hbm_bandwidth":10,"hbm_capacity":1000},"gpus_per_node":2,)"
         R"("intra_node":{"bandwidth":5,"latency":0.5},)"
         R"("inter_node":{"bandwidth":1,"latency":2,"topology":"ring"})" +
         extra + "}";
}

// small() with `gpu` replaced by the given JSON object text.
std::string json_with_gpu(const std::string& gpu) {
  return R"({"name":"small","gpu":)" + gpu +
         R"(,"gpus_per_node":2,"intra_node":{"bandwidth":5,"latency":0.5},)"
         R"("inter_node":{"bandwidth":1,"latency":2,"topology":"ring"}})";
}

TEST(HardwareSpec, DefaultsQueuesAndSlowdown) {
  const HardwareSpec spec = small();
  EXPECT_EQ(spec.hardware_queues, 8);
  EXPECT_EQ(spec.compute_slowdown_during_comm, 0.0);
}

TEST(HardwareSpec, DefaultsToNoQuantizationAndFullEfficiency) {
  const GpuSpec gpu = small().gpu;
  EXPECT_EQ(gpu.sm_count, 0);
  EXPECT_EQ(gpu.gemm_efficiency, 1.0);
  EXPECT_EQ(gpu.memory_efficiency, 1.0);
}

TEST(HardwareSpec, PeakIsAbsentForAnUnsupportedPrecision) {
  const HardwareSpec spec = small();
  EXPECT_EQ(spec.gpu.peak(Precision::kBf16), 100.0);
  EXPECT_EQ(spec.gpu.peak(Precision::kFp8), std::nullopt);
}

void expect_invalid(const HardwareSpec& spec, const std::string& message) {
  EXPECT_THAT([&] { validate(spec); }, ThrowsMessage<InvalidConfig>(HasSubstr(message)));
}

HardwareSpec with(void (*change)(HardwareSpec&)) {
  HardwareSpec spec = small();
  change(spec);
  return spec;
}

TEST(ValidateHardware, AcceptsAValidSpec) { EXPECT_NO_THROW(validate(small())); }

TEST(ValidateHardware, AcceptsTheEdgesOfTheNewGpuFields) {
  HardwareSpec spec = small();
  spec.gpu.sm_count = 0;  // unknown: no quantization
  spec.gpu.gemm_efficiency = 1.0;
  spec.gpu.memory_efficiency = 1e-3;
  EXPECT_NO_THROW(validate(spec));
}

TEST(ValidateHardware, RejectsEachOutOfRangeField) {
  const std::string where = "invalid hardware \"small\": ";
  expect_invalid(with([](HardwareSpec& s) { s.gpu.peak_flops[Precision::kFp8] = 0; }),
                 where + "gpu.peak_flops.fp8: expected a positive number, got 0.0");
  expect_invalid(with([](HardwareSpec& s) { s.gpu.peak_flops.clear(); }),
                 where + "gpu.peak_flops: expected a peak for at least one precision, got none");
  expect_invalid(with([](HardwareSpec& s) { s.gpu.hbm_bandwidth = -1; }),
                 where + "gpu.hbm_bandwidth: expected a positive number, got -1.0");
  expect_invalid(with([](HardwareSpec& s) { s.gpu.hbm_capacity = 0; }),
                 where + "gpu.hbm_capacity: expected a positive integer, got 0");
  expect_invalid(with([](HardwareSpec& s) { s.gpu.sm_count = -1; }),
                 where + "gpu.sm_count: expected an integer >= 0, got -1");
  expect_invalid(with([](HardwareSpec& s) { s.gpu.gemm_efficiency = 0; }),
                 where + "gpu.gemm_efficiency: expected a number in (0, 1], got 0.0");
  expect_invalid(with([](HardwareSpec& s) { s.gpu.gemm_efficiency = 1.5; }),
                 where + "gpu.gemm_efficiency: expected a number in (0, 1], got 1.5");
  expect_invalid(with([](HardwareSpec& s) {
                   s.gpu.memory_efficiency = std::numeric_limits<double>::quiet_NaN();
                 }),
                 where + "gpu.memory_efficiency: expected a number in (0, 1], got nan");
  expect_invalid(with([](HardwareSpec& s) { s.gpu.memory_efficiency = -0.5; }),
                 where + "gpu.memory_efficiency: expected a number in (0, 1], got -0.5");
  expect_invalid(with([](HardwareSpec& s) { s.gpu.fp8_gemm_efficiency = 0.0; }),
                 where + "gpu.fp8_gemm_efficiency: expected a number in (0, 1], got 0");
  expect_invalid(with([](HardwareSpec& s) { s.gpu.gemm_tile_overhead = 0.5; }),
                 where + "gpu.gemm_tile_overhead: expected seconds in [0, 0.001], got 0.5");
  expect_invalid(with([](HardwareSpec& s) {
                   s.gpu.gemm_tile_overhead = std::numeric_limits<double>::quiet_NaN();
                 }),
                 where + "gpu.gemm_tile_overhead: expected seconds in [0, 0.001], got nan");
  expect_invalid(with([](HardwareSpec& s) { s.gpu.kernel_floor = -1e-6; }),
                 where + "gpu.kernel_floor: expected seconds in [0, 0.001], got -1e-06");
  expect_invalid(with([](HardwareSpec& s) { s.gpu.gemm_floor = 0.25; }),
                 where + "gpu.gemm_floor: expected seconds in [0, 0.001], got 0.25");
  expect_invalid(with([](HardwareSpec& s) { s.gpus_per_node = 0; }),
                 where + "gpus_per_node: expected a positive integer, got 0");
  expect_invalid(with([](HardwareSpec& s) {
                   s.intra_node.bandwidth = std::numeric_limits<double>::infinity();
                 }),
                 where + "intra_node.bandwidth: expected a positive number, got inf");
  expect_invalid(with([](HardwareSpec& s) { s.intra_node.latency = -1e-6; }),
                 where + "intra_node.latency: expected a number >= 0, got -1e-06");
  expect_invalid(with([](HardwareSpec& s) { s.inter_node.bandwidth = 0; }),
                 where + "inter_node.bandwidth: expected a positive number, got 0.0");
  expect_invalid(with([](HardwareSpec& s) {
                   s.inter_node.latency = std::numeric_limits<double>::quiet_NaN();
                 }),
                 where + "inter_node.latency: expected a number >= 0, got nan");
  expect_invalid(with([](HardwareSpec& s) { s.inter_node.topology = ""; }),
                 where + "inter_node.topology: expected a non-empty name, got \"\"");
  expect_invalid(with([](HardwareSpec& s) { s.inter_node.nccl_host_cpu = "arm"; }),
                 where + "inter_node.nccl_host_cpu: expected \"intel\" or \"amd\", got \"arm\"");
  expect_invalid(with([](HardwareSpec& s) { s.hardware_queues = 0; }),
                 where + "hardware_queues: expected a positive integer, got 0");
  expect_invalid(with([](HardwareSpec& s) { s.compute_slowdown_during_comm = -0.5; }),
                 where + "compute_slowdown_during_comm: expected a number >= 0, got -0.5");
}

TEST(ValidateHardware, ListsEveryProblem) {
  HardwareSpec spec = small();
  spec.gpus_per_node = 0;
  spec.hardware_queues = -1;
  expect_invalid(spec,
                 "invalid hardware \"small\": 2 problems\n"
                 "  - gpus_per_node: expected a positive integer, got 0\n"
                 "  - hardware_queues: expected a positive integer, got -1");
}

TEST(HardwareJson, WritesCanonicalText) {
  HardwareSpec spec = small();
  spec.gpu.peak_flops[Precision::kFp8] = 200;
  spec.compute_slowdown_during_comm = 0.25;
  spec.comm_slowdown_during_compute = 0.5;
  EXPECT_EQ(to_json(spec),
            R"({"name":"small","gpu":{"name":"toy","peak_flops":{"bf16":100.0,"fp32":25.0,)"
            R"("fp8":200.0},"hbm_bandwidth":10.0,"hbm_capacity":1000,"sm_count":0,)"
            R"("gemm_efficiency":1.0,"memory_efficiency":1.0},"gpus_per_node":2,)"
            R"("intra_node":{"bandwidth":5.0,"latency":0.5},)"
            R"("inter_node":{"bandwidth":1.0,"latency":2.0,"topology":"ring"},)"
            R"("hardware_queues":8,"compute_slowdown_during_comm":0.25,)"
            R"("comm_slowdown_during_compute":0.5})"
            "\n");
}

TEST(HardwareJson, ReadsDefaultsForOptionalKeys) {
  EXPECT_EQ(hardware_from_json(json_with("")), small());
}

TEST(HardwareJson, RoundTripsEveryField) {
  HardwareSpec spec = small();
  spec.gpu.peak_flops = {{Precision::kBf16, 989.4e12},
                         {Precision::kFp16, 989.4e12},
                         {Precision::kFp32, 66.9e12},
                         {Precision::kFp8, 1978.9e12}};
  spec.gpu.hbm_bandwidth = 3.35e12;
  spec.gpu.hbm_capacity = 141'000'000'000;
  spec.gpu.sm_count = 132;
  spec.gpu.gemm_efficiency = 0.75;
  spec.gpu.memory_efficiency = 0.85;
  spec.gpu.fp8_gemm_efficiency = 0.7;
  spec.gpu.gemm_tile_overhead = 1.1e-6;
  spec.gpu.kernel_floor = 3.4e-6;
  spec.gpu.gemm_floor = 6.2e-6;
  spec.intra_node.latency = 1.3e-6;
  spec.inter_node.nccl_host_cpu = "amd";
  spec.hardware_queues = 32;
  spec.compute_slowdown_during_comm = 0.1;
  EXPECT_EQ(hardware_from_json(to_json(spec)), spec);
}

TEST(HardwareJson, NamesTheHostCpuOnlyWhenGiven) {
  HardwareSpec spec = small();
  spec.inter_node.nccl_host_cpu = "intel";
  EXPECT_THAT(to_json(spec), HasSubstr(R"("topology":"ring","nccl_host_cpu":"intel"})"));
  EXPECT_THAT(to_json(small()), Not(HasSubstr("nccl_host_cpu")));
  // The DGX presets name their hosts: AMD EPYC in the DGX A100, Intel Xeon in the DGX H100.
  EXPECT_EQ(hardware_preset("dgx-a100").inter_node.nccl_host_cpu, "amd");
  EXPECT_EQ(hardware_preset("dgx-h100").inter_node.nccl_host_cpu, "intel");
}

TEST(HardwareJson, RoundTripsAFusedAttentionTable) {
  HardwareSpec spec = small();
  spec.gpu.fused_attention = AttentionKernelTable{
      .kernel = "k", .seq_lens = {512, 4096}, .forward = {3e14, 5e14}, .backward = {2e14, 4e14}};
  EXPECT_EQ(hardware_from_json(to_json(spec)), spec);
  EXPECT_THAT(to_json(spec),
              HasSubstr(R"("fused_attention":{"kernel":"k","seq_lens":[512.0,4096.0])"));
  // The presets carry their measured tables (hardware_presets.cc cites them).
  EXPECT_TRUE(hardware_preset("dgx-h100").gpu.fused_attention.has_value());
  EXPECT_EQ(hardware_from_json(to_json(hardware_preset("dgx-a100"))), hardware_preset("dgx-a100"));
}

TEST(HardwareJson, RejectsAFusedAttentionTableThatDoesNotAddUp) {
  HardwareSpec spec = small();
  spec.gpu.fused_attention = AttentionKernelTable{
      .kernel = "k", .seq_lens = {512, 4096}, .forward = {3e14}, .backward = {2e14, 4e14}};
  EXPECT_THAT([&] { validate(spec); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("gpu.fused_attention: expected seq_lens, forward "
                            "and backward of one equal, non-zero length, got 2, 1 and 2")));
  spec.gpu.fused_attention->forward = {3e14, 5e14};
  spec.gpu.fused_attention->seq_lens = {4096, 512};
  EXPECT_THAT(
      [&] { validate(spec); },
      ThrowsMessage<InvalidConfig>(HasSubstr("gpu.fused_attention.seq_lens: expected ascending")));
  const std::string text = R"({"name": "x", "gpu": {"name": "g", "peak_flops": {"bf16": 1e12},
      "hbm_bandwidth": 1e12, "hbm_capacity": 1000, "fused_attention": {"kernel": "k",
      "seq_lens": [512], "forward": [-1], "backward": [1e12]}}, "gpus_per_node": 1,
      "intra_node": {"bandwidth": 1e9, "latency": 0}, "inter_node": {"bandwidth": 1e9,
      "latency": 0, "topology": "t"}})";
  EXPECT_THAT([&] { (void)hardware_from_json(text, "hw.json"); },
              ThrowsMessage<ParseError>(HasSubstr("gpu.fused_attention.forward[0]")));
}

TEST(HardwareJson, CountsUnknownKeysAtTheirPath) {
  Diagnostics diagnostics;
  const std::string text =
      R"({"name":"small","gpu":{"name":"toy","peak_flops":{"bf16":100},"hbm_bandwidth":10,)"
      R"("hbm_capacity":1000,"tdp":700},"gpus_per_node":2,"rack":"a",)"
      R"("intra_node":{"bandwidth":5,"latency":0.5,"switch":true},)"
      R"("inter_node":{"bandwidth":1,"latency":2,"topology":"ring","rails":8}})";
  const HardwareSpec spec = hardware_from_json(text, "hw.json", &diagnostics);
  EXPECT_EQ(spec.gpus_per_node, 2);
  EXPECT_EQ(diagnostics.count("unknown_key"), 4u);
  EXPECT_THAT(diagnostics.messages(),
              UnorderedElementsAre(::testing::StartsWith("gpu.tdp: unknown key"),
                                   ::testing::StartsWith("rack: unknown key"),
                                   ::testing::StartsWith("intra_node.switch: unknown key"),
                                   ::testing::StartsWith("inter_node.rails: unknown key")));
}

void expect_parse_error(const std::string& text, const std::string& message) {
  EXPECT_THAT([&] { (void)hardware_from_json(text, "hw.json"); },
              ThrowsMessage<ParseError>(HasSubstr(message)))
      << text;
}

TEST(HardwareJson, RejectsMalformedJsonWithItsPosition) {
  expect_parse_error("{\n  \"name\": }", "hw.json:2:11: malformed JSON: syntax error");
}

TEST(HardwareJson, RejectsANonObject) {
  expect_parse_error("[1]", "hw.json: top level: expected an object, got [1]");
  expect_parse_error(json_with_gpu("3"), "hw.json: gpu: expected an object, got 3");
  expect_parse_error(json_with(R"(,"intra_node":[])"),
                     "hw.json: intra_node: expected an object, got []");
  expect_parse_error(json_with(R"(,"inter_node":null)"),
                     "hw.json: inter_node: expected an object, got null");
  expect_parse_error(
      json_with_gpu(R"({"name":"toy","peak_flops":1,"hbm_bandwidth":1,"hbm_capacity":1})"),
      "hw.json: gpu.peak_flops: expected an object, got 1");
}

TEST(HardwareJson, RejectsAMissingKey) {
  expect_parse_error(R"({"name":"x"})", "hw.json: top level: missing key \"gpu\"");
  expect_parse_error(json_with_gpu(R"({"name":"toy","peak_flops":{"bf16":1},"hbm_capacity":1})"),
                     "hw.json: gpu: missing key \"hbm_bandwidth\"");
  expect_parse_error(json_with(R"(,"intra_node":{"bandwidth":5})"),
                     "hw.json: intra_node: missing key \"latency\"");
  expect_parse_error(json_with(R"(,"inter_node":{"bandwidth":1,"latency":2})"),
                     "hw.json: inter_node: missing key \"topology\"");
}

TEST(HardwareJson, RejectsOutOfRangeNumbers) {
  expect_parse_error(json_with(R"(,"gpus_per_node":0)"),
                     "hw.json: gpus_per_node: expected a positive integer, got 0");
  expect_parse_error(json_with(R"(,"gpus_per_node":2.5)"),
                     "hw.json: gpus_per_node: expected a positive integer, got 2.5");
  expect_parse_error(json_with(R"(,"hardware_queues":18446744073709551615)"),
                     "hw.json: hardware_queues: expected a positive integer, got "
                     "18446744073709551615");
  expect_parse_error(json_with(R"(,"compute_slowdown_during_comm":-0.1)"),
                     "hw.json: compute_slowdown_during_comm: expected a number >= 0, got -0.1");
  expect_parse_error(json_with(R"(,"comm_slowdown_during_compute":-0.1)"),
                     "hw.json: comm_slowdown_during_compute: expected a number >= 0, got -0.1");
  expect_parse_error(json_with(R"(,"intra_node":{"bandwidth":0,"latency":0})"),
                     "hw.json: intra_node.bandwidth: expected a positive number, got 0");
  expect_parse_error(json_with(R"(,"inter_node":{"bandwidth":1,"latency":"x","topology":"t"})"),
                     "hw.json: inter_node.latency: expected a number >= 0, got \"x\"");
  expect_parse_error(json_with_gpu(R"({"name":"toy","peak_flops":{"bf16":1},"hbm_bandwidth":true,)"
                                   R"("hbm_capacity":1})"),
                     "hw.json: gpu.hbm_bandwidth: expected a positive number, got true");
  expect_parse_error(json_with_gpu(R"({"name":"toy","peak_flops":{"bf16":1},"hbm_bandwidth":1,)"
                                   R"("hbm_capacity":8e10})"),
                     "hw.json: gpu.hbm_capacity: expected a positive integer, got 80000000000.0");
}

TEST(HardwareJson, ReadsTheOptionalGpuFields) {
  const HardwareSpec spec = hardware_from_json(
      json_with_gpu(R"({"name":"toy","peak_flops":{"bf16":100,"fp32":25},"hbm_bandwidth":10,)"
                    R"("hbm_capacity":1000,"sm_count":108,"gemm_efficiency":0.8,)"
                    R"("memory_efficiency":1,"fp8_gemm_efficiency":0.7,)"
                    R"("gemm_tile_overhead":2e-6,"kernel_floor":3e-6,"gemm_floor":5e-6})"));
  EXPECT_EQ(spec.gpu.sm_count, 108);
  EXPECT_EQ(spec.gpu.gemm_efficiency, 0.8);
  EXPECT_EQ(spec.gpu.memory_efficiency, 1.0);
  EXPECT_EQ(spec.gpu.fp8_gemm_efficiency, 0.7);
  EXPECT_EQ(spec.gpu.gemm_tile_overhead, 2e-6);
  EXPECT_EQ(spec.gpu.kernel_floor, 3e-6);
  EXPECT_EQ(spec.gpu.gemm_floor, 5e-6);
}

TEST(HardwareJson, RejectsOutOfRangeGpuFields) {
  const std::string head = R"({"name":"toy","peak_flops":{"bf16":1},"hbm_bandwidth":1,)"
                           R"("hbm_capacity":1,)";
  expect_parse_error(json_with_gpu(head + R"("sm_count":-1})"),
                     "hw.json: gpu.sm_count: expected an integer >= 0, got -1");
  expect_parse_error(json_with_gpu(head + R"("sm_count":1.5})"),
                     "hw.json: gpu.sm_count: expected an integer >= 0, got 1.5");
  expect_parse_error(json_with_gpu(head + R"("gemm_efficiency":0})"),
                     "hw.json: gpu.gemm_efficiency: expected a number in (0, 1], got 0");
  expect_parse_error(json_with_gpu(head + R"("gemm_efficiency":1.5})"),
                     "hw.json: gpu.gemm_efficiency: expected a number in (0, 1], got 1.5");
  expect_parse_error(json_with_gpu(head + R"("memory_efficiency":"high"})"),
                     "hw.json: gpu.memory_efficiency: expected a number in (0, 1], got \"high\"");
  expect_parse_error(json_with_gpu(head + R"("fp8_gemm_efficiency":2})"),
                     "hw.json: gpu.fp8_gemm_efficiency: expected a number in (0, 1], got 2");
  expect_parse_error(json_with_gpu(head + R"("gemm_tile_overhead":-1})"),
                     "hw.json: gpu.gemm_tile_overhead: expected a number >= 0, got -1");
  expect_parse_error(json_with_gpu(head + R"("kernel_floor":-1})"),
                     "hw.json: gpu.kernel_floor: expected a number >= 0, got -1");
  expect_parse_error(json_with_gpu(head + R"("gemm_floor":"fast"})"),
                     "hw.json: gpu.gemm_floor: expected a number >= 0, got \"fast\"");
}

TEST(HardwareJson, RejectsBadPeaks) {
  expect_parse_error(
      json_with_gpu(R"({"name":"toy","peak_flops":{"int8":1},"hbm_bandwidth":1,"hbm_capacity":1})"),
      "hw.json: gpu.peak_flops: expected precisions \"bf16\", \"fp16\", \"fp32\", \"fp8\", got "
      "\"int8\"");
  expect_parse_error(
      json_with_gpu(R"({"name":"toy","peak_flops":{"fp8":-1},"hbm_bandwidth":1,"hbm_capacity":1})"),
      "hw.json: gpu.peak_flops.fp8: expected a positive number, got -1");
  expect_parse_error(
      json_with_gpu(R"({"name":"toy","peak_flops":{},"hbm_bandwidth":1,"hbm_capacity":1})"),
      "hw.json: gpu.peak_flops: expected a peak for at least one precision, got {}");
}

TEST(HardwareJson, RejectsWrongTypes) {
  expect_parse_error(R"({"name":7})", "hw.json: name: expected a string, got 7");
  expect_parse_error(
      json_with_gpu(R"({"name":1,"peak_flops":{"bf16":1},"hbm_bandwidth":1,"hbm_capacity":1})"),
      "hw.json: gpu.name: expected a string, got 1");
  expect_parse_error(json_with(R"(,"inter_node":{"bandwidth":1,"latency":2,"topology":3})"),
                     "hw.json: inter_node.topology: expected a string, got 3");
}

TEST(HardwareJson, RejectsAnEmptyTopologyAsInvalidConfig) {
  EXPECT_THAT(
      [] {
        (void)hardware_from_json(
            json_with(R"(,"inter_node":{"bandwidth":1,"latency":2,"topology":""})"), "hw.json");
      },
      ThrowsMessage<InvalidConfig>(HasSubstr(
          "invalid hardware \"small\": inter_node.topology: expected a non-empty name, got \"\"")));
}

TEST(HardwareJson, RejectsANameThatIsNotUtf8WhenWriting) {
  HardwareSpec spec = small();
  spec.name = "bad\xff";
  EXPECT_THAT([&] { (void)to_json(spec); },
              ThrowsMessage<InvalidConfig>(HasSubstr("cannot write JSON: invalid UTF-8")));
}

// Issue 17: a hardware file is a spec or the document `metron profile --sweep` writes, whose
// "hardware" is the spec and whose "measurement" is not read.
TEST(HardwareFileJson, ReadsABareSpecAndAMeasuredDocumentAlike) {
  EXPECT_EQ(hardware_from_file_json(json_with(""), "hw.json"), small());
  const std::string document = R"({"hardware": )" + json_with("") +
                               R"(, "measurement": {"command": "metron profile --sweep",)"
                               R"( "grid": [1, 2, {"anything": true}]}})";
  Diagnostics diagnostics;
  EXPECT_EQ(hardware_from_file_json(document, "hw.json", &diagnostics), small());
  EXPECT_EQ(diagnostics.count("unknown_key"), 0U);  // inside "measurement" nothing is a key
  EXPECT_EQ(hardware_from_file_json(R"({"hardware": )" + json_with("") + "}", "hw.json"), small());
}

TEST(HardwareFileJson, ADocumentsErrorsNameTheirPathUnderHardware) {
  const auto read = [](const std::string& text) {
    return [text] { (void)hardware_from_file_json(text, "doc.json"); };
  };
  EXPECT_THAT(read(R"({"hardware": )" + json_with(R"(,"gpus_per_node":0)") + "}"),
              ThrowsMessage<ParseError>(HasSubstr(
                  "doc.json: hardware.gpus_per_node: expected a positive integer, got 0")));
  EXPECT_THAT(
      read(R"({"hardware": 3})"),
      ThrowsMessage<ParseError>(HasSubstr("doc.json: hardware: expected an object, got 3")));
  EXPECT_THAT(read(R"({"hardware": )" + json_with("") + R"(, "measurement": "today"})"),
              ThrowsMessage<ParseError>(
                  HasSubstr("doc.json: measurement: expected an object, got \"today\"")));
  Diagnostics diagnostics;
  (void)hardware_from_file_json(
      R"({"hardware": )" + json_with(R"(,"rack":"a")") + R"(, "measurment": {}})", "doc.json",
      &diagnostics);
  EXPECT_THAT(diagnostics.messages(),
              UnorderedElementsAre(::testing::StartsWith("measurment: unknown key"),
                                   ::testing::StartsWith("hardware.rack: unknown key")));
}

}  // namespace
}  // namespace metron::models
