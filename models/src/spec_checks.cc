#include "spec_checks.h"

#include <cmath>

#include "metron/base/error.h"

namespace metron::models::detail {

std::string number_text(double value) {
  if (!std::isfinite(value)) return std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf");
  return Json(value).dump();
}

void check_positive(std::vector<std::string>& problems, const std::string& key,
                    std::int64_t value) {
  if (value <= 0) {
    problems.push_back(key + ": expected a positive integer, got " + std::to_string(value));
  }
}

void check_positive(std::vector<std::string>& problems, const std::string& key, double value) {
  if (!(std::isfinite(value) && value > 0)) {
    problems.push_back(key + ": expected a positive number, got " + number_text(value));
  }
}

void check_non_negative(std::vector<std::string>& problems, const std::string& key, double value) {
  if (!(std::isfinite(value) && value >= 0)) {
    problems.push_back(key + ": expected a number >= 0, got " + number_text(value));
  }
}

void check_at_most(std::vector<std::string>& problems, const std::string& key, std::int64_t value,
                   std::int64_t limit, const std::string& why) {
  if (value > limit) {
    problems.push_back(key + ": expected at most " + std::to_string(limit) + " (" + why +
                       "), got " + std::to_string(value));
  }
}

void check_divisible(std::vector<std::string>& problems, const std::string& what, std::int64_t n,
                     const std::string& by, std::int64_t d) {
  if (n > 0 && d > 0 && n % d != 0) {
    problems.push_back(what + " (" + std::to_string(n) + ") must be divisible by " + by + " (" +
                       std::to_string(d) + ")");
  }
}

void throw_if_problems(const std::string& where, const std::vector<std::string>& problems) {
  if (problems.size() == 1) throw InvalidConfig(where + ": " + problems.front());
  if (!problems.empty()) {
    throw InvalidConfig(format_problem_list(
        where + ": " + std::to_string(problems.size()) + " problems", problems));
  }
}

}  // namespace metron::models::detail
