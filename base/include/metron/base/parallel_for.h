#pragma once
// A minimal work-sharing loop for the planner: indices are handed out in increasing order from
// one counter, so work that is sorted by priority is started in that order on every thread.

#include <cstdint>
#include <functional>

namespace metron {

/// The machine's hardware threads, at least 1.
std::int32_t hardware_threads() noexcept;

/// Calls body(i) for every i in [0, n) on `threads` threads (the caller among them; 0 means
/// hardware_threads()). body must be safe to run concurrently. When a call throws, no further
/// index is started and the first exception is rethrown once every thread has stopped. Fewer
/// threads run when the machine refuses to start more (the results are the same).
void parallel_for(std::int64_t n, std::int32_t threads,
                  const std::function<void(std::int64_t)>& body);

}  // namespace metron
