#pragma once
// Number flags checked as text, before CLI11 converts them: CLI11 reads integers with strtoll,
// which clamps 99999999999999999999 to 2^63 - 1 without a word and reads 010 as octal and 0x10 as
// hex, and its CLI::Range lets "nan" through every range (issue 14). Every integer flag of every
// command goes through integer_in(), every decimal one through number_in().

#include <CLI/CLI.hpp>
#include <cstdint>
#include <limits>

namespace metron::cli {

/// A validator accepting the decimal integers in [least, most]; anything else (a word, a
/// fraction, a value that does not fit 64 bits) gets "expected an integer ..., got TEXT".
CLI::Validator integer_in(std::int64_t least,
                          std::int64_t most = std::numeric_limits<std::int64_t>::max());

/// A validator accepting the finite decimal numbers in [least, most] ("0.5", "1e3"; not "nan",
/// "inf" or 1e400); anything else gets "expected a number from LEAST to MOST, got TEXT".
CLI::Validator number_in(double least, double most);

/// A validator accepting the decimal integers from 0 to 2^64 - 1, for unsigned flags (--seed).
CLI::Validator unsigned_integer();

/// Adds integer_in(min, max of int64) to every signed integer option of `cmd` and of its option
/// groups, unsigned_integer() to every unsigned one and a finite-number check to every decimal
/// one, so that a flag without a range of its own is still a number that fits. Call once, after
/// the command's options are declared.
void check_integer_options(CLI::App& cmd);

}  // namespace metron::cli
