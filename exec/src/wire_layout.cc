#include "metron/exec/wire_layout.h"

#include <string>

#include "metron/base/error.h"

namespace metron::exec::detail {

WireType wire_type(ir::DType dtype) noexcept {
  switch (dtype) {
    case ir::DType::kFp32:
      return WireType::kFloat32;
    case ir::DType::kBf16:  // Gloo has no bf16; fp16 has the same size
    case ir::DType::kFp16:
      return WireType::kFloat16;
    case ir::DType::kInt64:
      return WireType::kInt64;
    case ir::DType::kInt32:
      return WireType::kInt32;
    case ir::DType::kFp8:  // Gloo has no fp8; bytes are bytes
    case ir::DType::kUint8:
      return WireType::kUint8;
  }
  return WireType::kUint8;
}

std::int64_t element_bytes(WireType type) noexcept {
  switch (type) {
    case WireType::kFloat32:
    case WireType::kInt32:
      return 4;
    case WireType::kFloat16:
      return 2;
    case WireType::kInt64:
      return 8;
    case WireType::kUint8:
      return 1;
  }
  return 1;
}

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

bool is_split(ir::CollectiveOp op) {
  return op == ir::CollectiveOp::kAllGather || op == ir::CollectiveOp::kReduceScatter ||
         op == ir::CollectiveOp::kAllToAll;
}

}  // namespace

std::int64_t WireLayout::input_elements() const noexcept {
  return op == ir::CollectiveOp::kAllGather ? chunk_elements : call_elements;
}

std::int64_t WireLayout::output_elements() const noexcept {
  return op == ir::CollectiveOp::kReduceScatter ? chunk_elements : call_elements;
}

WireLayout wire_layout(const ir::Collective& collective, std::int32_t group_size) {
  if (collective.count < 1 || group_size < 1) {
    throw InvalidConfig(std::string(ir::to_string(collective.op)) +
                        ": expected count >= 1 and a non-empty group; got count " +
                        std::to_string(collective.count) + ", group size " +
                        std::to_string(group_size));
  }
  WireLayout layout{
      .type = wire_type(collective.dtype), .calls = collective.count, .op = collective.op};
  if (collective.bytes <= 0) return layout;
  const std::int64_t call_bytes = ceil_div(collective.bytes, collective.count);
  const std::int64_t size = element_bytes(layout.type);
  if (is_split(collective.op)) {
    layout.chunk_elements = ceil_div(call_bytes, size * group_size);
    layout.call_elements = layout.chunk_elements * group_size;
  } else {
    layout.call_elements = ceil_div(call_bytes, size);
    layout.chunk_elements = layout.call_elements;
  }
  return layout;
}

}  // namespace metron::exec::detail
