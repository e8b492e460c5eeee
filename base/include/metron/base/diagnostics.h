#pragma once
// Non-fatal oddities met while reading input (an unknown JSON key, a clamped value). Libraries
// record them here and return them with their result; they never print (docs/STYLE.md, Errors §8).

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace metron {

/// A count per kind of oddity plus the first few messages of each, as Perfetto's stats table.
class Diagnostics {
 public:
  /// Records one occurrence of `kind` (e.g. "unknown_key") with a message naming the place.
  void add(const std::string& kind, std::string message);

  [[nodiscard]] bool empty() const noexcept { return counts_.empty(); }
  [[nodiscard]] std::size_t count(const std::string& kind) const;
  [[nodiscard]] const std::map<std::string, std::size_t>& counts() const noexcept {
    return counts_;
  }
  /// Messages in the order they were added, at most kMaxMessages per kind.
  [[nodiscard]] const std::vector<std::string>& messages() const noexcept { return messages_; }

  static constexpr std::size_t kMaxMessages = 20;

 private:
  std::map<std::string, std::size_t> counts_;
  std::vector<std::string> messages_;
};

}  // namespace metron
