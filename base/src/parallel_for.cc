#include "metron/base/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace metron {

std::int32_t hardware_threads() noexcept {
  return static_cast<std::int32_t>(std::max(1U, std::thread::hardware_concurrency()));
}

void parallel_for(std::int64_t n, std::int32_t threads,
                  const std::function<void(std::int64_t)>& body) {
  if (n <= 0) return;
  const std::int64_t workers =
      std::min<std::int64_t>(n, threads > 0 ? threads : hardware_threads());
  std::atomic<std::int64_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr first;
  std::mutex mutex;
  const auto work = [&] {
    while (!failed.load(std::memory_order_relaxed)) {
      const std::int64_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= n) return;
      try {
        body(i);
      } catch (...) {
        const std::lock_guard lock(mutex);
        if (!first) first = std::current_exception();
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (std::int64_t t = 1; t < workers; ++t) {
    // A machine that refuses more threads (ulimit -u, cgroup pids.max) leaves the work to the
    // threads already started: the results are the same, only slower. Letting the exception
    // escape here would destroy joinable threads, which terminates the process.
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {
      break;
    }
  }
  work();
  for (std::thread& t : pool) t.join();
  if (first) std::rethrow_exception(first);
}

}  // namespace metron
