#include "integer_flags.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <string>
#include <system_error>

namespace metron::cli {

CLI::Validator integer_in(std::int64_t least, std::int64_t most) {
  constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  const std::string expected =
      least == kMin && most == kMax ? "a decimal integer from -2^63 to 2^63 - 1"
      : most == kMax                ? "an integer >= " + std::to_string(least) + " (and below 2^63)"
                     : "an integer from " + std::to_string(least) + " to " + std::to_string(most);
  return CLI::Validator(
      [least, most, expected](const std::string& text) {
        std::int64_t n = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
        const bool ok = !text.empty() && error == std::errc() && end == text.data() + text.size() &&
                        n >= least && n <= most;
        return ok ? std::string() : "expected " + expected + ", got '" + text + "'";
      },
      "");
}

CLI::Validator number_in(double least, double most) {
  const std::string expected = fmt::format("a number from {:g} to {:g}", least, most);
  return CLI::Validator(
      [least, most, expected](const std::string& text) {
        double x = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), x);
        // from_chars reads "nan" and "inf" too: the range test refuses them (NaN compares false).
        const bool ok = !text.empty() && error == std::errc() && end == text.data() + text.size() &&
                        std::isfinite(x) && x >= least && x <= most;
        return ok ? std::string() : "expected " + expected + ", got '" + text + "'";
      },
      "");
}

CLI::Validator unsigned_integer() {
  return CLI::Validator(
      [](const std::string& text) {
        std::uint64_t n = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
        const bool ok = !text.empty() && error == std::errc() && end == text.data() + text.size();
        return ok ? std::string()
                  : "expected a decimal integer from 0 to 2^64 - 1, got '" + text + "'";
      },
      "");
}

void check_integer_options(CLI::App& cmd) {
  for (CLI::Option* option : cmd.get_options()) {
    // CLI11 names the type of every signed integer option, optional or not, INT, and of every
    // unsigned one UINT (strtoull, which clamps as strtoll does and takes "-1" for 2^64 - 1).
    if (option->get_type_name() == "INT") {
      option->check(integer_in(std::numeric_limits<std::int64_t>::min()));
    } else if (option->get_type_name() == "UINT") {
      option->check(unsigned_integer());
    } else if (option->get_type_name() == "FLOAT") {
      option->check(
          number_in(-std::numeric_limits<double>::max(), std::numeric_limits<double>::max()));
    }
  }
  for (CLI::App* group :
       cmd.get_subcommands([](CLI::App* sub) { return sub->get_name().empty(); })) {
    check_integer_options(*group);
  }
}

}  // namespace metron::cli
