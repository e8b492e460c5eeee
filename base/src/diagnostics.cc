#include "metron/base/diagnostics.h"

#include <utility>

namespace metron {

void Diagnostics::add(const std::string& kind, std::string message) {
  // Keep the first messages of each kind only: a file with 10^6 unknown keys must not make
  // the diagnostics larger than the result they accompany.
  if (++counts_[kind] <= kMaxMessages) messages_.push_back(std::move(message));
}

std::size_t Diagnostics::count(const std::string& kind) const {
  auto it = counts_.find(kind);
  return it == counts_.end() ? 0 : it->second;
}

}  // namespace metron
