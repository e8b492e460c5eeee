#pragma once
// Per-rank rows of actions: the text form of a schedule or graph, and PyTorch's CSV form.
//
// Text form (Note [rows text form]):
//   # comments and blank lines are ignored
//   group dp0: 0 2              one line per communication group, before the rank rows
//   rank 0: 0F0 0F1 _ 0B0 ...   one line per rank, ranks 0..n-1 in order, `_` an idle slot
// Canonical text (what format_rows writes) parses and prints back identically.
//
// CSV form (PyTorch's _load_csv/_dump_csv): one line per rank, one action per cell, an empty cell
// is idle, spaces around cells are stripped, cells holding ',' or '"' are double-quoted.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "metron/ir/action.h"

namespace metron::ir {

/// A communication group declared in the text form.
struct GroupDecl {
  std::string name;
  std::vector<std::int32_t> ranks;
  friend bool operator==(const GroupDecl&, const GroupDecl&) = default;
};

/// rows[r] is rank r's actions in issue order; nullopt is an idle slot.
struct ActionRows {
  std::vector<GroupDecl> groups;
  std::vector<std::vector<std::optional<Action>>> rows;
  friend bool operator==(const ActionRows&, const ActionRows&) = default;
};

/// Parses the text form. Throws ParseError at source:line:col.
ActionRows parse_rows(std::string_view text, const std::string& source = "<text>");
/// Writes the canonical text form.
std::string format_rows(const ActionRows& rows);

/// Parses PyTorch's CSV form. Throws ParseError at source:line:col.
ActionRows parse_csv(std::string_view text, const std::string& source = "<csv>");
/// Writes PyTorch's CSV form. Throws InvalidConfig when `rows` declares groups (CSV has no place
/// for them; use the text form).
std::string format_csv(const ActionRows& rows);

}  // namespace metron::ir
