#pragma once
// A hint for the large per-task arrays that interpreters read at the frontier of every rank at
// once (the IR's flat index and ordering state, the simulator's timings). With hundreds of ranks
// that is more 4 KiB pages than the TLB holds, and a page walk per access costs more than the
// access; 2 MiB pages avoid it.

#include <cstddef>
#include <cstdint>

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace metron {

/// Asks the OS to back the whole 2 MiB pages inside [data, data + bytes) with transparent huge
/// pages. Call it before the memory is first touched (reserve, advise, then fill). Only a hint:
/// without THP support nothing changes but speed.
inline void advise_huge_pages(const void* data, std::size_t bytes) noexcept {
#ifdef __linux__
  // The x86-64 / arm64 (4 KiB granule) transparent huge page size.
  constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20U;
  const auto first = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t begin = (first + kHugePage - 1) & ~(kHugePage - 1);
  const std::uintptr_t end = (first + bytes) & ~(kHugePage - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

}  // namespace metron
