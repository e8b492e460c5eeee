#pragma once
// The tests' view of a GlooWorld's buffers, so that they can check the values a collective moves
// without widening GlooWorld's interface. Private to exec_gloo and its tests; no torch types.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "metron/exec/gloo_world.h"

namespace metron::exec {

struct GlooWorldTestAccess {
  /// Fills the input of the buffer set that the next collective(group, ..., collective) of a
  /// single-threaded caller takes: all `count` calls' inputs back to back, in wire elements.
  static void write_input(GlooWorld& world, std::int32_t group, const ir::Collective& collective,
                          const std::vector<std::byte>& bytes);
  /// What the last such collective left as output (reduce-scatter: each call's result chunk).
  [[nodiscard]] static std::vector<std::byte> read_output(GlooWorld& world, std::int32_t group,
                                                          const ir::Collective& collective);
};

}  // namespace metron::exec
