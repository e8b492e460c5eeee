// Parsing and printing of one action token (Note [action syntax] in action.h).

#include "metron/ir/action.h"

#include <algorithm>
#include <array>
#include <bitset>
#include <cctype>
#include <charconv>
#include <limits>

#include "metron/base/error.h"

namespace metron::ir {
namespace {

enum class Need : std::uint8_t { kNone, kOptional, kRequired };

// Tokens of the form [<stage>]NAME[<mb>][@<peer>]: PyTorch's regex plus R, STEP and OTHER.
struct SimpleSpec {
  ActionType type;
  std::string_view name;
  Need stage;
  Need mb;
  bool p2p;
};

constexpr std::array<SimpleSpec, 14> kSimpleSpecs{{
    {ActionType::kForward, "F", Need::kRequired, Need::kRequired, false},
    {ActionType::kBackwardInput, "I", Need::kRequired, Need::kRequired, false},
    {ActionType::kBackwardWeight, "W", Need::kRequired, Need::kRequired, false},
    {ActionType::kBackward, "B", Need::kRequired, Need::kRequired, false},
    {ActionType::kRecompute, "R", Need::kRequired, Need::kRequired, false},
    {ActionType::kOptimizerStep, "STEP", Need::kOptional, Need::kNone, false},
    {ActionType::kOtherCompute, "OTHER", Need::kOptional, Need::kOptional, false},
    {ActionType::kSendForward, "SEND_F", Need::kRequired, Need::kRequired, true},
    {ActionType::kRecvForward, "RECV_F", Need::kRequired, Need::kRequired, true},
    {ActionType::kSendBackward, "SEND_B", Need::kRequired, Need::kRequired, true},
    {ActionType::kRecvBackward, "RECV_B", Need::kRequired, Need::kRequired, true},
    {ActionType::kUnshard, "UNSHARD", Need::kRequired, Need::kNone, false},
    {ActionType::kReshard, "RESHARD", Need::kRequired, Need::kNone, false},
    {ActionType::kReduceGrad, "REDUCE_GRAD", Need::kRequired, Need::kNone, false},
}};

constexpr std::array<std::pair<CollectiveOp, std::string_view>, 6> kCollectiveNames{{
    {CollectiveOp::kAllReduce, "ALL_REDUCE"},
    {CollectiveOp::kReduceScatter, "REDUCE_SCATTER"},
    {CollectiveOp::kAllGather, "ALL_GATHER"},
    {CollectiveOp::kReduce, "REDUCE"},
    {CollectiveOp::kBroadcast, "BROADCAST"},
    {CollectiveOp::kAllToAll, "ALL_TO_ALL"},
}};

constexpr std::string_view kOverlapSuffix = "OVERLAP_F_B";
constexpr std::string_view kExpectedAction =
    "expected <stage><F|I|W|B|R|...><mb>, a collective such as ALL_REDUCE[group#seq,bytes=N], "
    "WAIT(<action>) or _";
constexpr std::string_view kExpectedKeys = "bytes, dtype, root, bucket, count, stage, mb or stream";

const SimpleSpec* find_simple(std::string_view name) {
  for (const auto& spec : kSimpleSpecs) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

const SimpleSpec* find_simple(ActionType type) {
  for (const auto& spec : kSimpleSpecs) {
    if (spec.type == type) return &spec;
  }
  return nullptr;
}

std::optional<CollectiveOp> find_collective(std::string_view name) {
  for (const auto& [op, n] : kCollectiveNames) {
    if (n == name) return op;
  }
  return std::nullopt;
}

std::string_view collective_name(CollectiveOp op) {
  for (const auto& [o, n] : kCollectiveNames) {
    if (o == op) return n;
  }
  return "?";
}

bool is_compute(ActionType type) { return type <= ActionType::kOtherCompute; }

bool is_upper_word_char(char c) { return (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '-' || c == '.';
}

// Quoted for a message; a hostile token of a megabyte is cut, not copied whole into it.
std::string quoted(std::string_view s) {
  constexpr std::size_t kMaxQuoted = 200;
  if (s.size() <= kMaxQuoted) return "\"" + std::string(s) + "\"";
  return "\"" + std::string(s.substr(0, kMaxQuoted)) + "\"... (" + std::to_string(s.size()) +
         " characters)";
}

// Reads one token left to right; failures point at the offending character.
class Cursor {
 public:
  Cursor(std::string_view text, const std::string& source, std::size_t line, std::size_t column)
      : text_(text), source_(source), line_(line), column_(column) {}

  [[nodiscard]] bool done() const { return pos_ >= text_.size(); }
  [[nodiscard]] char peek() const { return done() ? '\0' : text_[pos_]; }
  [[nodiscard]] std::size_t pos() const { return pos_; }
  [[nodiscard]] std::string_view rest() const { return text_.substr(pos_); }
  [[nodiscard]] std::string_view since(std::size_t start) const {
    return text_.substr(start, pos_ - start);
  }

  bool eat(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }

  template <class Pred>
  std::string_view take_while(Pred pred) {
    std::size_t start = pos_;
    while (!done() && pred(text_[pos_])) ++pos_;
    return text_.substr(start, pos_ - start);
  }

  // The action starting at `start`, up to the ';' or ')' that closes it, for messages.
  [[nodiscard]] std::string_view extent(std::size_t start) const {
    int depth = 0;
    std::size_t end = start;
    for (; end < text_.size(); ++end) {
      char c = text_[end];
      if (c == '(' || c == '[') ++depth;
      if ((c == ')' || c == ']') && depth-- == 0) break;
      if (c == ';' && depth == 0) break;
    }
    return text_.substr(start, end - start);
  }

  /// Opens one level of WAIT(...) or (...)OVERLAP_F_B at offset `at`. The parser recurses once
  /// per level, so a hostile token (WAIT( 50,000 times) would overflow the stack; real tokens
  /// nest once or twice, and deeper ones are refused before the next recursion.
  void enter(std::size_t at) {
    if (++depth_ > kMaxActionNesting) {
      fail_at(at, "action nested too deeply; expected at most " +
                      std::to_string(kMaxActionNesting) +
                      " levels of WAIT(...) and (...)OVERLAP_F_B, found a deeper one here");
    }
  }
  void leave() { --depth_; }

  [[noreturn]] void fail_at(std::size_t offset, const std::string& message) const {
    throw ParseError(source_, line_, column_ + offset, message);
  }
  [[noreturn]] void fail(const std::string& message) const { fail_at(pos_, message); }

  void expect(char c, std::string_view context) {
    if (eat(c)) return;
    std::string found = done() ? "the end of the token" : quoted(rest().substr(0, 1));
    fail("expected \"" + std::string(1, c) + "\" " + std::string(context) + ", found " + found);
  }

 private:
  std::string_view text_;
  const std::string& source_;
  std::size_t line_;
  std::size_t column_;
  std::size_t pos_ = 0;
  std::size_t depth_ = 0;
};

template <class Int>
Int parse_number(Cursor& in, std::string_view what) {
  std::size_t start = in.pos();
  std::string_view digits = in.take_while(is_digit);
  if (digits.empty()) {
    std::string found = in.done() ? "the end of the token" : quoted(in.rest().substr(0, 1));
    in.fail("expected " + std::string(what) + " (digits), found " + found);
  }
  Int value{};
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (ec != std::errc{}) {
    in.fail_at(start, std::string(what) + " " + quoted(digits) +
                          " is out of range; expected at most " +
                          std::to_string(std::numeric_limits<Int>::max()));
  }
  return value;
}

[[noreturn]] void fail_unknown(const Cursor& in, std::size_t start, std::size_t at,
                               std::string_view word) {
  std::string message =
      "unknown action " + quoted(in.extent(start)) + "; " + std::string(kExpectedAction);
  // PyTorch's schedules of 2024 wrote full backward as BW; today's PyTorch writes B.
  if (word == "BW") message += "; hint: BW is PyTorch's old name for full backward, write B";
  in.fail_at(at, message);
}

Action parse_any(Cursor& in);

Action parse_simple_rest(Cursor& in, const SimpleSpec& spec, std::int32_t stage) {
  Action a{.type = spec.type, .stage = stage};
  if (spec.stage == Need::kRequired && stage < 0) {
    in.fail("action " + std::string(spec.name) + " needs a stage; expected <stage>" +
            std::string(spec.name) + (spec.mb == Need::kNone ? "" : "<mb>"));
  }
  if (spec.mb == Need::kRequired || (spec.mb == Need::kOptional && is_digit(in.peek()))) {
    a.microbatch = parse_number<std::int32_t>(
        in, "a microbatch number after " + quoted(std::string(spec.name)));
  }
  if (spec.p2p && in.eat('@')) a.peer = parse_number<std::int32_t>(in, "a peer rank after \"@\"");
  return a;
}

Action parse_staged(Cursor& in) {
  std::size_t start = in.pos();
  auto stage = parse_number<std::int32_t>(in, "a stage number");
  std::size_t word_at = in.pos();
  std::string_view word = in.take_while(is_upper_word_char);
  const SimpleSpec* spec = find_simple(word);
  if (spec == nullptr) fail_unknown(in, start, word_at, word);
  return parse_simple_rest(in, *spec, stage);
}

Action parse_overlap(Cursor& in) {
  in.enter(in.pos());
  in.expect('(', "to open OVERLAP_F_B");
  Action a{.type = ActionType::kOverlapForwardBackward};
  for (char closer : {';', ')'}) {
    std::size_t at = in.pos();
    Action part = parse_any(in);
    if (!is_compute(part.type)) {
      in.fail_at(at, "OVERLAP_F_B holds two compute actions; found " + quoted(in.since(at)));
    }
    a.sub.push_back(std::move(part));
    in.expect(closer, closer == ';' ? "between the two halves of OVERLAP_F_B"
                                    : "after the second half of OVERLAP_F_B");
  }
  std::size_t word_at = in.pos();
  if (in.take_while(is_upper_word_char) != kOverlapSuffix) {
    in.fail_at(word_at, "expected \"OVERLAP_F_B\" after \"(...)\", found " +
                            quoted(in.rest().empty() ? in.since(word_at) : in.rest()));
  }
  in.leave();
  return a;
}

Action parse_wait(Cursor& in) {
  in.enter(in.pos());
  in.expect('(', "after WAIT");
  Action a{.type = ActionType::kHostWait};
  a.sub.push_back(parse_any(in));
  in.expect(')', "to close WAIT(");
  in.leave();
  return a;
}

// Collective keys, in canonical order; each parser stores the value it reads.
struct KeySpec {
  std::string_view name;
  void (*parse)(Cursor&, Action&);
};

std::string_view parse_name(Cursor& in, std::string_view what) {
  std::string_view name = in.take_while(is_name_char);
  if (name.empty()) in.fail("expected " + std::string(what) + " (letters, digits, _ - .)");
  return name;
}

void read_bytes(Cursor& in, Action& a) {
  a.collective->bytes = parse_number<std::int64_t>(in, "a byte count");
}

void read_dtype(Cursor& in, Action& a) {
  std::size_t at = in.pos();
  std::string_view name = parse_name(in, "a dtype");
  auto dtype = parse_dtype(name);
  if (!dtype) in.fail_at(at, "unknown dtype " + quoted(name) + "; expected " + enum_names<DType>());
  a.collective->dtype = *dtype;
}

void read_root(Cursor& in, Action& a) {
  a.collective->root = parse_number<std::int32_t>(in, "a root rank");
}

void read_bucket(Cursor& in, Action& a) {
  a.collective->bucket = parse_number<std::int32_t>(in, "a bucket number");
}

void read_count(Cursor& in, Action& a) {
  a.collective->count = parse_number<std::int32_t>(in, "a collective count");
}

void read_stage(Cursor& in, Action& a) { a.stage = parse_number<std::int32_t>(in, "a stage"); }

void read_mb(Cursor& in, Action& a) {
  a.microbatch = parse_number<std::int32_t>(in, "a microbatch");
}

void read_stream(Cursor& in, Action& a) {
  std::string_view name = parse_name(in, "a stream name");
  // "comm" is the default; storing it as absent keeps one representation per meaning.
  if (name != "comm") a.collective->stream = std::string(name);
}

constexpr std::array<KeySpec, 8> kKeySpecs{{
    {"bytes", read_bytes},
    {"dtype", read_dtype},
    {"root", read_root},
    {"bucket", read_bucket},
    {"count", read_count},
    {"stage", read_stage},
    {"mb", read_mb},
    {"stream", read_stream},
}};

void parse_key_value(Cursor& in, Action& a, std::bitset<kKeySpecs.size()>& seen) {
  std::size_t at = in.pos();
  std::string_view key = in.take_while([](char c) { return c >= 'a' && c <= 'z'; });
  for (std::size_t i = 0; i < kKeySpecs.size(); ++i) {
    if (kKeySpecs[i].name != key) continue;
    if (seen[i]) in.fail_at(at, "collective key " + quoted(key) + " given twice");
    seen[i] = true;
    in.expect('=', "after collective key " + quoted(key));
    kKeySpecs[i].parse(in, a);
    return;
  }
  std::string found = key.empty() ? quoted(in.rest().substr(0, 1)) : quoted(key);
  in.fail_at(at, "unknown collective key " + found + "; expected " + std::string(kExpectedKeys));
}

Action parse_collective(Cursor& in, CollectiveOp op, std::size_t start) {
  Action a{.type = ActionType::kCollective, .collective = CollectiveAction{.op = op}};
  in.expect('[', "after " + quoted(collective_name(op)));
  a.collective->group = std::string(parse_name(in, "a group name"));
  in.expect('#', "and a sequence number after the group name");
  a.collective->seq = parse_number<std::int64_t>(in, "a sequence number");
  std::bitset<kKeySpecs.size()> seen;
  while (in.eat(',')) parse_key_value(in, a, seen);
  in.expect(']', "to close the collective");
  if (!seen[0]) {
    in.fail_at(start, "collective " + quoted(in.since(start)) + " has no size; expected bytes=<n>");
  }
  return a;
}

Action parse_word_first(Cursor& in) {
  std::size_t start = in.pos();
  std::string_view word = in.take_while(is_upper_word_char);
  if (word == "WAIT") return parse_wait(in);
  if (auto op = find_collective(word)) return parse_collective(in, *op, start);
  const SimpleSpec* spec = find_simple(word);
  if (spec == nullptr) fail_unknown(in, start, start, word);
  return parse_simple_rest(in, *spec, -1);
}

Action parse_any(Cursor& in) {
  char c = in.peek();
  if (c == '(') return parse_overlap(in);
  if (is_digit(c)) return parse_staged(in);
  if (is_upper_word_char(c)) return parse_word_first(in);
  fail_unknown(in, in.pos(), in.pos(), "");
}

void append_number(std::string& out, std::int64_t value) {
  if (value >= 0) out += std::to_string(value);
}

std::string collective_to_string(const Action& a) {
  const CollectiveAction& c = *a.collective;
  std::string out = std::string(collective_name(c.op)) + "[" + c.group + "#" +
                    std::to_string(c.seq) + ",bytes=" + std::to_string(c.bytes);
  if (c.dtype != DType::kFp32) out += ",dtype=" + std::string(to_string(c.dtype));
  if (c.root) out += ",root=" + std::to_string(*c.root);
  if (c.bucket) out += ",bucket=" + std::to_string(*c.bucket);
  if (c.count != 1) out += ",count=" + std::to_string(c.count);
  if (a.stage >= 0) out += ",stage=" + std::to_string(a.stage);
  if (a.microbatch >= 0) out += ",mb=" + std::to_string(a.microbatch);
  if (c.stream) out += ",stream=" + *c.stream;
  return out + "]";
}

}  // namespace

Action parse_action(std::string_view token, const std::string& source, std::size_t line,
                    std::size_t column) {
  Cursor in(token, source, line, column);
  if (token.empty()) in.fail("empty action; " + std::string(kExpectedAction));
  Action a = parse_any(in);
  if (!in.done()) {
    std::string_view rest = in.rest();
    std::string message = "unexpected " + quoted(rest) + " after " + quoted(in.since(0));
    if (rest.front() == '@') message += "; only SEND_F, RECV_F, SEND_B and RECV_B take @<peer>";
    in.fail(message + "; expected the end of the action");
  }
  return a;
}

std::string to_string(const Action& action) {
  switch (action.type) {
    case ActionType::kOverlapForwardBackward:
      METRON_ASSERT(action.sub.size() == 2, "OVERLAP_F_B needs two sub-actions");
      return "(" + to_string(action.sub[0]) + ";" + to_string(action.sub[1]) + ")" +
             std::string(kOverlapSuffix);
    case ActionType::kHostWait:
      METRON_ASSERT(action.sub.size() == 1, "WAIT needs one sub-action");
      return "WAIT(" + to_string(action.sub[0]) + ")";
    case ActionType::kCollective:
      METRON_ASSERT(action.collective.has_value(), "a collective action needs its collective");
      return collective_to_string(action);
    default:
      break;
  }
  const SimpleSpec* spec = find_simple(action.type);
  METRON_ASSERT(spec != nullptr, "every simple action type has a spec");
  std::string out;
  append_number(out, action.stage);
  out += spec->name;
  append_number(out, action.microbatch);
  if (action.peer) out += "@" + std::to_string(*action.peer);
  return out;
}

bool is_text_form_name(std::string_view name) noexcept {
  return !name.empty() && std::all_of(name.begin(), name.end(), is_name_char);
}

}  // namespace metron::ir
