// Path-naming JSON reading helpers (json_paths.h).

#include "json_paths.h"

#include <limits>

namespace metron::scenario::detail {

void fail(const std::string& path, const std::string& what) { throw PathError{path, what}; }

std::string brief(const Json& v) {
  std::string text = v.dump();
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

void require_known_keys(const Json& object, const std::string& path,
                        std::initializer_list<std::string_view> known) {
  if (!object.is_object())
    fail(path.empty() ? "top level" : path, "expected an object, got " + brief(object));
  for (const auto& item : object.items()) {
    bool found = false;
    for (std::string_view k : known) found = found || k == item.key();
    if (!found) {
      std::string names;
      for (std::string_view k : known) names += (names.empty() ? "" : ", ") + std::string(k);
      fail((path.empty() ? "" : path + ".") + item.key(), "unknown key; expected one of " + names);
    }
  }
}

std::int32_t read_positive_int32(const Json& v, const std::string& path) {
  if (!v.is_number_integer() || v.get<std::int64_t>() <= 0 ||
      v.get<std::int64_t>() > std::numeric_limits<std::int32_t>::max()) {
    fail(path, "expected a positive integer, got " + brief(v));
  }
  return v.get<std::int32_t>();
}

std::int64_t read_positive_int64(const Json& v, const std::string& path) {
  if (!v.is_number_integer() || v.get<std::int64_t>() <= 0) {
    fail(path, "expected a positive integer, got " + brief(v));
  }
  return v.get<std::int64_t>();
}

bool read_bool(const Json& v, const std::string& path) {
  if (!v.is_boolean()) fail(path, "expected true or false, got " + brief(v));
  return v.get<bool>();
}

}  // namespace metron::scenario::detail
