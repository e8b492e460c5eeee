#pragma once
// What every fuzz target shares: the input as text, the line between expected and unexpected
// errors, and the round-trip check.
//
// Note [fuzz verdicts]: a parser that rejects its input with a metron::Error whose
// is_input_error() is true (ParseError, InvalidConfig, InvalidGraph, Deadlock) did its job. Any
// other exception escapes LLVMFuzzerTestOneInput, so libFuzzer reports the input as a crash:
// InternalError (a broken METRON_ASSERT), std::bad_alloc, std::out_of_range, nlohmann's own
// exceptions leaking through a reader, and so on. So does a sanitizer report, and so does a
// round trip that the headers promise to be exact but that is not (a trap with a message).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string_view>
#include <utility>

#include "metron/base/error.h"

namespace metron::fuzz {

/// The fuzzer's bytes as text (the readers take any bytes; nothing needs to be valid UTF-8).
inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// Calls `read()`; nullopt when it rejects the input as bad input (Note [fuzz verdicts]), its
/// value otherwise. Every other exception propagates and becomes a finding.
template <class Read>
auto accept(Read&& read) -> std::optional<decltype(std::forward<Read>(read)())> {
  try {
    return std::forward<Read>(read)();
  } catch (const Error& e) {
    if (e.is_input_error()) return std::nullopt;
    throw;
  }
}

/// A broken promise of the code under test (a round trip that is not exact): says which and
/// stops with a trap, which libFuzzer reports as a crash and saves the input for.
[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "metron fuzz: %s\n", what);
  std::fflush(stderr);
  __builtin_trap();
}

inline void require(bool ok, const char* what) {
  if (!ok) fail(what);
}

}  // namespace metron::fuzz
