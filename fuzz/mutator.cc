#include "mutator.h"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string_view>
#include <utility>

namespace metron::fuzz {
namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Appends the token between the quotes of `quoted` ("..." with escapes) to `out`; false when
// `quoted` is not one.
bool unquote(std::string_view quoted, Bytes& out) {
  if (quoted.size() < 2 || quoted.front() != '"' || quoted.back() != '"') return false;
  const std::string_view body = quoted.substr(1, quoted.size() - 2);
  for (std::size_t i = 0; i < body.size(); ++i) {
    if (body[i] != '\\') {
      out.push_back(static_cast<std::uint8_t>(body[i]));
      continue;
    }
    if (++i == body.size()) return false;
    if (body[i] == '\\' || body[i] == '"') {
      out.push_back(static_cast<std::uint8_t>(body[i]));
    } else if (body[i] == 'x' && i + 2 < body.size() && hex_digit(body[i + 1]) >= 0 &&
               hex_digit(body[i + 2]) >= 0) {
      out.push_back(
          static_cast<std::uint8_t>(hex_digit(body[i + 1]) * 16 + hex_digit(body[i + 2])));
      i += 2;
    } else {
      return false;
    }
  }
  return true;
}

// Bytes that often sit on an edge: zero, the sign bits, all ones, and numbers as text that
// readers must refuse or bound.
constexpr std::array<std::string_view, 10> kInteresting = {
    "0", "-1", "2147483648", "9223372036854775808", "1e308", "1e400", "-0", "nan", "\"\"", "[]"};

}  // namespace

std::vector<Bytes> parse_dictionary(const std::string& text) {
  std::vector<Bytes> tokens;
  std::size_t line_number = 0;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    ++line_number;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (line.empty() || line.front() == '#') continue;
    if (const std::size_t eq = line.find("=\""); line.front() != '"' && eq != std::string::npos) {
      line.remove_prefix(eq + 1);  // name="token"
    }
    Bytes token;
    if (!unquote(line, token) || token.empty()) {
      throw std::runtime_error("dictionary line " + std::to_string(line_number) +
                               ": expected \"token\" or name=\"token\"");
    }
    tokens.push_back(std::move(token));
  }
  return tokens;
}

Mutator::Mutator(std::vector<Bytes> seeds, std::vector<Bytes> dictionary, std::uint64_t seed,
                 std::size_t max_len)
    : seeds_(std::move(seeds)),
      dictionary_(std::move(dictionary)),
      random_(seed),
      max_len_(max_len) {
  if (seeds_.empty()) throw std::invalid_argument("Mutator: no seed input");
  for (Bytes& s : seeds_) {
    if (s.size() > max_len_) s.resize(max_len_);
  }
  for (const std::string_view v : kInteresting) dictionary_.emplace_back(v.begin(), v.end());
}

std::size_t Mutator::below(std::size_t n) {
  return std::uniform_int_distribution<std::size_t>(0, n - 1)(random_);
}

void Mutator::edit(Bytes& data) {
  const auto insert = [&](std::size_t at, const Bytes& what) {
    const std::size_t room = max_len_ > data.size() ? max_len_ - data.size() : 0;
    const std::size_t n = std::min(room, what.size());
    data.insert(data.begin() + static_cast<std::ptrdiff_t>(at), what.begin(),
                what.begin() + static_cast<std::ptrdiff_t>(n));
  };
  const std::size_t at = below(data.size() + 1);  // a place, the end included
  switch (below(8)) {
    case 0:  // flip a bit
      if (!data.empty()) data[below(data.size())] ^= static_cast<std::uint8_t>(1U << below(8));
      break;
    case 1:  // set a byte
      if (!data.empty()) data[below(data.size())] = static_cast<std::uint8_t>(below(256));
      break;
    case 2:  // insert a byte
      insert(at, Bytes{static_cast<std::uint8_t>(below(256))});
      break;
    case 3: {  // erase a run
      if (at == data.size()) break;
      const std::size_t n = 1 + below(std::min<std::size_t>(data.size() - at, 64));
      data.erase(data.begin() + static_cast<std::ptrdiff_t>(at),
                 data.begin() + static_cast<std::ptrdiff_t>(at + n));
      break;
    }
    case 4: {  // copy a run of the input to another place
      if (data.empty()) break;
      const std::size_t from = below(data.size());
      const std::size_t n = 1 + below(std::min<std::size_t>(data.size() - from, 256));
      const Bytes run(data.begin() + static_cast<std::ptrdiff_t>(from),
                      data.begin() + static_cast<std::ptrdiff_t>(from + n));
      insert(at, run);
      break;
    }
    case 5: {  // splice: this input's head and another's tail
      const Bytes& other = seeds_[below(seeds_.size())];
      const std::size_t from = below(other.size() + 1);
      data.resize(at);
      insert(at, Bytes(other.begin() + static_cast<std::ptrdiff_t>(from), other.end()));
      break;
    }
    case 6:  // insert a token
      insert(at, dictionary_[below(dictionary_.size())]);
      break;
    default: {  // overwrite with a token
      const Bytes& token = dictionary_[below(dictionary_.size())];
      const std::size_t n = std::min(token.size(), data.size() - at);
      std::copy_n(token.begin(), n, data.begin() + static_cast<std::ptrdiff_t>(at));
      break;
    }
  }
}

Bytes Mutator::next() {
  Bytes data = seeds_[below(seeds_.size())];
  const std::size_t edits = 1 + below(4);
  for (std::size_t i = 0; i < edits; ++i) edit(data);
  return data;
}

}  // namespace metron::fuzz
