#include "number_format.h"

#include <fmt/format.h>

namespace metron::cli {

std::string short_count(std::int64_t n) {
  const auto x = static_cast<double>(n);
  if (x >= 1e12) return fmt::format("{:.2f}T", x / 1e12);
  if (x >= 1e9) return fmt::format("{:.1f}B", x / 1e9);
  if (x >= 1e6) return fmt::format("{:.1f}M", x / 1e6);
  return fmt::format("{}", n);
}

}  // namespace metron::cli
