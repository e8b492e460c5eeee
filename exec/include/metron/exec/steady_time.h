#pragma once
// The executor's one clock, for its core and every backend. Every time it measures (task starts
// and ends, issue times, memory samples, iteration origins) is steady_clock in nanoseconds since
// its epoch, so that times from the host, the stream threads and, on one machine, other ranks
// compare directly.

#include <chrono>
#include <cstdint>

namespace metron::exec::detail {

inline std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace metron::exec::detail
