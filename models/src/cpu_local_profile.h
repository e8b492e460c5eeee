#pragma once
// Private: the measured profile behind the `cpu-local` hardware preset, compiled in from
// models/profiles/cpu-local.json (written by `metron profile --sweep`) at configure time.

#include <string_view>

namespace metron::models::detail {

/// The whole profile document: {"hardware": {...}, "measurement": {...}}.
std::string_view cpu_local_profile_json();

}  // namespace metron::models::detail
