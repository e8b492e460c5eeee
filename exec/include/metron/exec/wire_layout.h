#pragma once
// How a collective's bytes become communicator calls: wire dtype and element counts (Note [gloo
// world] in metron/exec/gloo_world.h). Gloo's and NCCL's calls are laid out alike, so both
// backends take their element counts from here; free of torch and CUDA types, so that the tests
// check the arithmetic directly.

#include <cstdint>

#include "metron/ir/task.h"

namespace metron::exec::detail {

/// The element types Gloo carries; bf16 and fp8 have none of their own (NCCL, which has both,
/// uses the same sizes).
enum class WireType : std::uint8_t { kFloat32, kFloat16, kInt64, kInt32, kUint8 };

/// bf16 → fp16 and fp8 → uint8 (same sizes); the others map to themselves.
[[nodiscard]] WireType wire_type(ir::DType dtype) noexcept;
[[nodiscard]] std::int64_t element_bytes(WireType type) noexcept;

/// The calls one collective() issues, each on its own slice of one buffer.
struct WireLayout {
  WireType type = WireType::kFloat32;
  std::int32_t calls = 1;           ///< ir::Collective::count
  std::int64_t call_elements = 0;   ///< one call's full buffer (all-gather output, RS input)
  std::int64_t chunk_elements = 0;  ///< one member's share: all-gather input, RS output, a2a split
  [[nodiscard]] std::int64_t input_elements() const noexcept;   ///< of one call
  [[nodiscard]] std::int64_t output_elements() const noexcept;  ///< of one call
  ir::CollectiveOp op = ir::CollectiveOp::kAllReduce;
};

/// Per call bytes/count, rounded up to whole elements; for all-gather, reduce-scatter and
/// all-to-all the chunk rounds up and call_elements = chunk_elements × group_size. 0 bytes gives
/// zero elements. Throws InvalidConfig for count < 1 or group_size < 1.
[[nodiscard]] WireLayout wire_layout(const ir::Collective& collective, std::int32_t group_size);

}  // namespace metron::exec::detail
