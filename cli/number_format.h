#pragma once
// Numbers for people: the short forms the tables of every command share.

#include <cstdint>
#include <string>

namespace metron::cli {

/// A count with a magnitude suffix: "125.2M", "174.6B", "1.01T".
std::string short_count(std::int64_t n);

}  // namespace metron::cli
