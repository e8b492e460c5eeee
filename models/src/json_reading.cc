#include "json_reading.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "metron/base/error.h"
#include "metron/base/json_error_text.h"
#include "metron/base/json_parse.h"
#include "preset_lookup.h"

namespace metron::models::detail {
void fail(const std::string& path, std::string what) { throw PathError{path, std::move(what)}; }

std::string brief(const Json& value) {
  constexpr std::size_t kMax = 40;
  std::string text = value.dump();
  return text.size() > kMax ? text.substr(0, kMax) + "..." : text;
}

std::int64_t read_positive_integer(const Json& v, const std::string& path) {
  const bool too_big =
      v.is_number_unsigned() &&
      v.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max());
  if (!v.is_number_integer() || too_big || v.get<std::int64_t>() <= 0) {
    fail(path, "expected a positive integer, got " + brief(v));
  }
  return v.get<std::int64_t>();
}

// JSON numbers are finite, so only the sign needs checking.
std::int64_t read_non_negative_integer(const Json& v, const std::string& path) {
  const bool too_big =
      v.is_number_unsigned() &&
      v.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max());
  if (!v.is_number_integer() || too_big || v.get<std::int64_t>() < 0) {
    fail(path, "expected an integer >= 0, got " + brief(v));
  }
  return v.get<std::int64_t>();
}

double read_positive_number(const Json& v, const std::string& path) {
  if (!v.is_number() || v.get<double>() <= 0) {
    fail(path, "expected a positive number, got " + brief(v));
  }
  return v.get<double>();
}

double read_non_negative_number(const Json& v, const std::string& path) {
  if (!v.is_number() || v.get<double>() < 0) fail(path, "expected a number >= 0, got " + brief(v));
  return v.get<double>();
}

std::string read_string(const Json& v, const std::string& path) {
  if (!v.is_string()) fail(path, "expected a string, got " + brief(v));
  return v.get<std::string>();
}

bool read_bool(const Json& v, const std::string& path) {
  if (!v.is_boolean()) fail(path, "expected true or false, got " + brief(v));
  return v.get<bool>();
}

Json parse_json(std::string_view text, const std::string& source) {
  return parse_json_document<Json>(text, source);
}

std::string dump_line(const Json& value, const std::string& what) {
  try {
    return value.dump() + "\n";
  } catch (const Json::type_error& e) {
    // Only a string that is not valid UTF-8 gets here.
    throw InvalidConfig(what + ": cannot write JSON: " + short_json_reason(e.what()));
  }
}

ObjectReader::ObjectReader(const Json& object, std::string path, Diagnostics* diagnostics)
    : object_(object), path_(std::move(path)), diagnostics_(diagnostics) {
  if (!object_.is_object()) {
    fail(path_.empty() ? "top level" : path_, "expected an object, got " + brief(object_));
  }
}

std::string ObjectReader::path_of(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

const Json* ObjectReader::find(std::string_view key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) known_.emplace_back(key);
  const auto it = object_.find(key);
  if (it == object_.end()) return nullptr;
  used_.emplace_back(key);
  return &*it;
}

namespace {

/// "; expected one of "a", "b"[; did you mean "a"?]" for an unknown `key`.
std::string known_keys_hint(const std::string& key, const std::vector<std::string>& known) {
  if (known.empty()) return "";
  std::string out = "; expected one of ";
  // A typo is at most a third of the key away (two edits for a short key).
  std::size_t best = std::max<std::size_t>(2, key.size() / 3) + 1;
  const std::string* nearest = nullptr;
  for (const std::string& k : known) {
    out += (&k == &known.front() ? "\"" : ", \"") + k + "\"";
    const std::size_t d = edit_distance(key, k);
    if (d < best) {
      best = d;
      nearest = &k;
    }
  }
  if (nearest != nullptr) out += "; did you mean \"" + *nearest + "\"?";
  return out;
}

}  // namespace

const Json& ObjectReader::required(std::string_view key) {
  const Json* value = find(key);
  if (value != nullptr) return *value;
  // A misspelt required key is missing and unknown at once: name the likely typo.
  std::string hint;
  for (const auto& item : object_.items()) {
    const bool asked = std::find(known_.begin(), known_.end(), item.key()) != known_.end();
    if (!asked && edit_distance(item.key(), key) <= std::max<std::size_t>(2, key.size() / 3)) {
      hint = " (is \"" + item.key() + "\" a typo?)";
      break;
    }
  }
  fail(path_.empty() ? "top level" : path_, "missing key \"" + std::string(key) + "\"" + hint);
}

void ObjectReader::finish() const {
  if (diagnostics_ == nullptr) return;
  for (const auto& item : object_.items()) {
    if (std::find(used_.begin(), used_.end(), item.key()) == used_.end()) {
      diagnostics_->add("unknown_key", path_of(item.key()) + ": unknown key" +
                                           known_keys_hint(item.key(), known_));
    }
  }
}

}  // namespace metron::models::detail
