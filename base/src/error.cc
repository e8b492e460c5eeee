#include "metron/base/error.h"

#include <utility>

namespace metron {

std::string format_problem_list(const std::string& headline,
                                const std::vector<std::string>& items) {
  std::string out = headline;
  for (const auto& item : items) {
    out += "\n  - ";
    out += item;
  }
  return out;
}

namespace {
std::string count_headline(std::size_t n, const char* singular, const char* plural) {
  return std::to_string(n) + " " + (n == 1 ? singular : plural);
}
}  // namespace

InvalidGraph::InvalidGraph(std::vector<std::string> problems)
    : Error(format_problem_list(
          "invalid graph: " + count_headline(problems.size(), "problem", "problems"), problems)),
      problems_(std::move(problems)) {}

ParseError::ParseError(std::string source, std::size_t line, std::size_t column,
                       const std::string& what)
    : Error(line == 0
                ? source + ": " + what
                : source + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + what),
      source_(std::move(source)),
      line_(line),
      column_(column) {}

Deadlock::Deadlock(std::vector<std::string> blocked)
    : Error(format_problem_list("deadlock: no task can make progress; " +
                                    count_headline(blocked.size(), "blocked task", "blocked tasks"),
                                blocked)),
      blocked_(std::move(blocked)) {}

InternalError::InternalError(const char* file, int line, const std::string& what)
    : Error(std::string("internal error at ") + file + ":" + std::to_string(line) + ": " + what) {}

}  // namespace metron
