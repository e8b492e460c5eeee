#pragma once
// A small random mutator for the replayer's --mutate mode (replay_main.cc): fuzzing for a fixed
// time in any build, CI's gcc ASan build among them, where libFuzzer (clang) is not built. It
// has no coverage feedback, so it finds what lies a few edits away from the seed corpus; the
// coverage-guided fuzzing that goes deep is bench/fuzz.sh's libFuzzer. Its edits are libFuzzer's
// common ones: flip a bit, set a byte, insert or erase bytes, copy a run within the input, splice
// in another input, and insert or overwrite with a dictionary token.

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace metron::fuzz {

using Bytes = std::vector<std::uint8_t>;

/// The tokens of a libFuzzer dictionary's text: one per line `"token"` or `name="token"`, with
/// \\, \" and \xHH escapes; empty lines and lines starting with # are skipped. Throws
/// std::runtime_error naming the line of anything else.
std::vector<Bytes> parse_dictionary(const std::string& text);

/// Makes inputs from `seeds` by random edits, reproducibly for one `seed`.
class Mutator {
 public:
  /// `seeds` must not be empty; every input made is at most `max_len` bytes.
  Mutator(std::vector<Bytes> seeds, std::vector<Bytes> dictionary, std::uint64_t seed,
          std::size_t max_len);

  /// The next input: a seed with one to four random edits.
  Bytes next();

 private:
  std::size_t below(std::size_t n);  // uniform in [0, n), n > 0
  void edit(Bytes& data);

  std::vector<Bytes> seeds_;
  std::vector<Bytes> dictionary_;
  std::mt19937_64 random_;
  std::size_t max_len_;
};

}  // namespace metron::fuzz
