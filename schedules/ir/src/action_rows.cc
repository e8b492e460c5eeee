// The per-rank text form and PyTorch's CSV form (Note [rows text form] in action_rows.h).

#include "metron/ir/action_rows.h"

#include <charconv>

#include "metron/base/error.h"

namespace metron::ir {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// Quoted for a message; a hostile token of a megabyte is cut, not copied whole into it.
std::string quoted(std::string_view s) {
  constexpr std::size_t kMaxQuoted = 200;
  if (s.size() <= kMaxQuoted) return "\"" + std::string(s) + "\"";
  return "\"" + std::string(s.substr(0, kMaxQuoted)) + "\"... (" + std::to_string(s.size()) +
         " characters)";
}

// One line of input; every position reported is 1-based and relative to the line start.
struct Line {
  std::string_view text;
  std::size_t number = 0;
};

std::vector<Line> split_lines(std::string_view text) {
  std::vector<Line> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back({line, lines.size() + 1});
    start = end + 1;
  }
  return lines;
}

// Reads the words of one text-form line.
class LineReader {
 public:
  LineReader(const Line& line, const std::string& source) : line_(line), source_(source) {}

  void skip_blanks() {
    while (pos_ < line_.text.size() && is_blank(line_.text[pos_])) ++pos_;
  }
  [[nodiscard]] bool done() const { return pos_ >= line_.text.size(); }
  [[nodiscard]] std::size_t column() const { return pos_ + 1; }

  std::string_view word(const char* stop = "") {
    std::size_t start = pos_;
    while (!done() && !is_blank(line_.text[pos_]) &&
           std::string_view(stop).find(line_.text[pos_]) == std::string_view::npos) {
      ++pos_;
    }
    return line_.text.substr(start, pos_ - start);
  }

  std::int32_t number(std::string_view what) {
    std::size_t at = column();
    std::string_view digits = word(":");
    std::int32_t value = 0;
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || ec != std::errc{} || ptr != digits.data() + digits.size() || value < 0) {
      fail(at, "expected " + std::string(what) + ", found " +
                   (digits.empty() ? std::string("nothing") : quoted(digits)));
    }
    return value;
  }

  void expect_colon(std::string_view after) {
    skip_blanks();
    if (!done() && line_.text[pos_] == ':') {
      ++pos_;
      return;
    }
    fail(column(), "expected \":\" after " + std::string(after));
  }

  [[noreturn]] void fail(std::size_t column, const std::string& message) const {
    throw ParseError(source_, line_.number, column, message);
  }

  [[nodiscard]] const Line& line() const { return line_; }
  [[nodiscard]] const std::string& source() const { return source_; }

 private:
  const Line& line_;
  const std::string& source_;
  std::size_t pos_ = 0;
};

void parse_group_line(LineReader& in, ActionRows& out) {
  in.skip_blanks();
  std::size_t at = in.column();
  std::string_view name = in.word(":");
  if (name.empty()) in.fail(at, "expected a group name after \"group\"");
  // Collectives name their group with the same alphabet (ir::is_text_form_name), so a group the
  // text form accepted is one it can refer to and write back.
  if (!is_text_form_name(name)) {
    in.fail(at, "group name " + quoted(name) + " has characters the text form cannot spell; " +
                    "expected letters, digits, '_', '-' and '.'");
  }
  if (!out.rows.empty()) {
    in.fail(at, "group " + quoted(name) +
                    " is declared after the rank rows; expected every "
                    "\"group\" line before \"rank 0:\"");
  }
  for (const auto& g : out.groups) {
    if (g.name == name) in.fail(at, "group " + quoted(name) + " is declared twice");
  }
  GroupDecl group{.name = std::string(name)};
  in.expect_colon("the group name");
  for (in.skip_blanks(); !in.done(); in.skip_blanks()) {
    group.ranks.push_back(in.number("a rank number"));
  }
  out.groups.push_back(std::move(group));
}

void parse_rank_line(LineReader& in, ActionRows& out) {
  in.skip_blanks();
  std::size_t at = in.column();
  std::int32_t rank = in.number("a rank number after \"rank\"");
  auto expected = static_cast<std::int32_t>(out.rows.size());
  if (rank != expected) {
    std::string what = rank < expected ? "rank " + std::to_string(rank) + " appears twice"
                                       : "rank " + std::to_string(rank) + " is out of order";
    in.fail(at, what + "; expected \"rank " + std::to_string(expected) + ":\"");
  }
  in.expect_colon("the rank number");
  auto& row = out.rows.emplace_back();
  for (in.skip_blanks(); !in.done(); in.skip_blanks()) {
    std::size_t column = in.column();
    std::string_view token = in.word();
    if (token == "_") {
      row.emplace_back(std::nullopt);
    } else {
      row.emplace_back(parse_action(token, in.source(), in.line().number, column));
    }
  }
}

// Splits one CSV line into cells, stripping spaces around each and undoing quotes. Each cell
// keeps the column where its content starts.
struct Cell {
  std::string text;
  std::size_t column = 1;
  bool quoted = false;
};

std::size_t skip_spaces(std::string_view s, std::size_t pos) {
  while (pos < s.size() && is_blank(s[pos])) ++pos;
  return pos;
}

std::size_t read_quoted(const Line& line, const std::string& source, std::size_t pos, Cell& cell) {
  std::string_view s = line.text;
  for (++pos; pos < s.size(); ++pos) {
    if (s[pos] != '"') {
      cell.text += s[pos];
    } else if (pos + 1 < s.size() && s[pos + 1] == '"') {
      cell.text += '"';
      ++pos;
    } else {
      return pos + 1;
    }
  }
  throw ParseError(source, line.number, cell.column - 1,
                   "unterminated quoted cell; expected a closing \"");
}

std::vector<Cell> split_cells(const Line& line, const std::string& source) {
  std::string_view s = line.text;
  std::vector<Cell> cells;
  std::size_t pos = 0;
  while (true) {
    pos = skip_spaces(s, pos);
    Cell& cell = cells.emplace_back(Cell{.column = pos + 1});
    if (pos < s.size() && s[pos] == '"') {
      cell.quoted = true;
      cell.column = pos + 2;
      pos = skip_spaces(s, read_quoted(line, source, pos, cell));
      if (pos < s.size() && s[pos] != ',') {
        throw ParseError(source, line.number, pos + 1,
                         "unexpected " + quoted(s.substr(pos, 1)) +
                             " after a quoted cell; "
                             "expected \",\" or the end of the line");
      }
    } else {
      std::size_t end = std::min(s.find(',', pos), s.size());
      std::size_t last = end;
      while (last > pos && is_blank(s[last - 1])) --last;
      cell.text = std::string(s.substr(pos, last - pos));
      pos = end;
    }
    if (pos >= s.size()) return cells;
    ++pos;  // the ','
  }
}

std::string csv_cell(const std::optional<Action>& action) {
  if (!action) return "";
  std::string text = to_string(*action);
  if (text.find_first_of(",\"") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    out += c;
    if (c == '"') out += '"';
  }
  return out + "\"";
}

}  // namespace

ActionRows parse_rows(std::string_view text, const std::string& source) {
  ActionRows out;
  for (const Line& line : split_lines(text)) {
    LineReader in(line, source);
    in.skip_blanks();
    if (in.done() || line.text[in.column() - 1] == '#') continue;
    std::size_t at = in.column();
    std::string_view keyword = in.word(":");
    if (keyword == "group") {
      parse_group_line(in, out);
    } else if (keyword == "rank") {
      parse_rank_line(in, out);
    } else {
      in.fail(at, "unknown line start " + quoted(keyword) +
                      "; expected \"group <name>: <ranks>\","
                      " \"rank <r>: <actions>\", a # comment or a blank line");
    }
  }
  return out;
}

std::string format_rows(const ActionRows& rows) {
  std::string out;
  for (const auto& group : rows.groups) {
    out += "group " + group.name + ":";
    for (std::int32_t r : group.ranks) out += " " + std::to_string(r);
    out += "\n";
  }
  for (std::size_t r = 0; r < rows.rows.size(); ++r) {
    out += "rank " + std::to_string(r) + ":";
    for (const auto& action : rows.rows[r]) out += " " + (action ? to_string(*action) : "_");
    out += "\n";
  }
  return out;
}

ActionRows parse_csv(std::string_view text, const std::string& source) {
  ActionRows out;
  for (const Line& line : split_lines(text)) {
    auto& row = out.rows.emplace_back();
    // A blank line is a rank with no actions, as Python's csv module reads it.
    if (line.text.find_first_not_of(" \t") == std::string_view::npos) continue;
    for (const Cell& cell : split_cells(line, source)) {
      if (cell.text.empty() || (!cell.quoted && cell.text == "_")) {
        row.emplace_back(std::nullopt);
      } else {
        row.emplace_back(parse_action(cell.text, source, line.number, cell.column));
      }
    }
  }
  return out;
}

std::string format_csv(const ActionRows& rows) {
  if (!rows.groups.empty()) {
    std::string names;
    for (const auto& g : rows.groups) names += (names.empty() ? "" : ", ") + quoted(g.name);
    throw InvalidConfig("cannot write groups " + names +
                        " as CSV: the CSV form has no place for them; use the text form");
  }
  std::string out;
  for (const auto& row : rows.rows) {
    // Python's csv writer quotes a lone empty cell so that it differs from an empty row.
    if (row.size() == 1 && !row[0]) {
      out += "\"\"\n";
      continue;
    }
    for (std::size_t i = 0; i < row.size(); ++i) out += (i == 0 ? "" : ",") + csv_cell(row[i]);
    out += "\n";
  }
  return out;
}

}  // namespace metron::ir
