// ModelSpec: names of its enums, validation, and the JSON form (Note [model JSON]).

#include "metron/models/model_spec.h"

#include <algorithm>
#include <array>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "metron/base/error.h"

namespace metron::models {
namespace {

// ordered_json keeps keys in insertion order (canonical output) and in document order when
// reading, so unknown keys are reported in the order they appear.
using Json = nlohmann::ordered_json;

constexpr std::array<std::pair<Precision, std::string_view>, 4> kPrecisionNames{
    {{Precision::kBf16, "bf16"},
     {Precision::kFp16, "fp16"},
     {Precision::kFp32, "fp32"},
     {Precision::kFp8, "fp8"}}};
constexpr std::array<std::pair<MlpKind, std::string_view>, 2> kMlpNames{
    {{MlpKind::kGelu, "gelu"}, {MlpKind::kSwiglu, "swiglu"}}};

template <class Enum, std::size_t N>
std::string_view name_of(const std::array<std::pair<Enum, std::string_view>, N>& names, Enum e) {
  for (const auto& [value, name] : names) {
    if (value == e) return name;
  }
  return "?";
}

template <class Enum, std::size_t N>
std::optional<Enum> parse_name(const std::array<std::pair<Enum, std::string_view>, N>& names,
                               std::string_view text) {
  for (const auto& [value, name] : names) {
    if (name == text) return value;
  }
  return std::nullopt;
}

void check_positive(std::vector<std::string>& problems, const char* key, std::int64_t value) {
  if (value <= 0) {
    problems.push_back(std::string(key) + ": expected a positive integer, got " +
                       std::to_string(value));
  }
}

void check_divisible(std::vector<std::string>& problems, const char* what, std::int64_t n,
                     const char* by, std::int64_t d) {
  if (n > 0 && d > 0 && n % d != 0) {
    problems.push_back(std::string(what) + " (" + std::to_string(n) + ") must be divisible by " +
                       by + " (" + std::to_string(d) + ")");
  }
}

std::vector<std::string> find_problems(const ModelSpec& spec) {
  std::vector<std::string> problems;
  check_positive(problems, "layers", spec.layers);
  check_positive(problems, "hidden", spec.hidden);
  check_positive(problems, "heads", spec.heads);
  check_positive(problems, "kv_heads", spec.num_kv_heads());
  check_positive(problems, "ffn_hidden", spec.ffn_size());
  check_positive(problems, "vocab", spec.vocab);
  check_positive(problems, "seq_len", spec.seq_len);
  check_divisible(problems, "hidden", spec.hidden, "heads", spec.heads);
  check_divisible(problems, "heads", spec.heads, "kv_heads", spec.num_kv_heads());
  if (spec.moe) {
    check_positive(problems, "moe.experts", spec.moe->experts);
    check_positive(problems, "moe.top_k", spec.moe->top_k);
    check_positive(problems, "moe.ffn_hidden", spec.moe->ffn_hidden);
    if (spec.moe->top_k > spec.moe->experts) {
      problems.push_back("moe.top_k (" + std::to_string(spec.moe->top_k) +
                         ") must be <= moe.experts (" + std::to_string(spec.moe->experts) + ")");
    }
  }
  return problems;
}

// A wrong type or value at a JSON path; model_from_json turns it into a ParseError.
struct PathError {
  std::string path;
  std::string what;
};

[[noreturn]] void fail(const std::string& path, std::string what) {
  throw PathError{path, std::move(what)};
}

std::string brief(const Json& value) {
  constexpr std::size_t kMax = 40;
  std::string text = value.dump();
  return text.size() > kMax ? text.substr(0, kMax) + "..." : text;
}

// Sizes must be positive here already: a 0 or "x" is a typo in the file, best reported at its key.
std::int64_t read_positive(const Json& v, const std::string& path) {
  const bool too_big =
      v.is_number_unsigned() &&
      v.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max());
  if (!v.is_number_integer() || too_big || v.get<std::int64_t>() <= 0) {
    fail(path, "expected a positive integer, got " + brief(v));
  }
  return v.get<std::int64_t>();
}

std::string read_string(const Json& v, const std::string& path) {
  if (!v.is_string()) fail(path, "expected a string, got " + brief(v));
  return v.get<std::string>();
}

bool read_bool(const Json& v, const std::string& path) {
  if (!v.is_boolean()) fail(path, "expected true or false, got " + brief(v));
  return v.get<bool>();
}

template <class Enum, std::size_t N>
Enum read_enum(const std::array<std::pair<Enum, std::string_view>, N>& names, const Json& v,
               const std::string& path) {
  std::string expected;
  for (const auto& [value, name] : names) {
    expected += (expected.empty() ? "\"" : ", \"") + std::string(name) + "\"";
  }
  const std::optional<Enum> value =
      v.is_string() ? parse_name(names, v.get<std::string>()) : std::nullopt;
  if (!value) fail(path, "expected one of " + expected + ", got " + brief(v));
  return *value;
}

// One JSON object being read: remembers the keys consumed so the rest count as unknown.
class ObjectReader {
 public:
  ObjectReader(const Json& object, std::string path, Diagnostics* diagnostics)
      : object_(object), path_(std::move(path)), diagnostics_(diagnostics) {
    if (!object_.is_object()) {
      fail(path_.empty() ? "top level" : path_, "expected an object, got " + brief(object_));
    }
  }

  [[nodiscard]] std::string path_of(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }

  const Json* find(std::string_view key) {
    const auto it = object_.find(key);
    if (it == object_.end()) return nullptr;
    used_.emplace_back(key);
    return &*it;
  }

  const Json& required(std::string_view key) {
    const Json* value = find(key);
    if (value == nullptr) {
      fail(path_.empty() ? "top level" : path_, "missing key \"" + std::string(key) + "\"");
    }
    return *value;
  }

  void finish() const {
    if (diagnostics_ == nullptr) return;
    for (const auto& item : object_.items()) {
      if (std::find(used_.begin(), used_.end(), item.key()) == used_.end()) {
        diagnostics_->add("unknown_key", path_of(item.key()) + ": unknown key");
      }
    }
  }

 private:
  const Json& object_;
  std::string path_;
  Diagnostics* diagnostics_;
  std::vector<std::string> used_;
};

MoeSpec read_moe(const Json& v, const std::string& path, Diagnostics* diagnostics) {
  ObjectReader in(v, path, diagnostics);
  MoeSpec moe;
  moe.experts = read_positive(in.required("experts"), in.path_of("experts"));
  moe.top_k = read_positive(in.required("top_k"), in.path_of("top_k"));
  moe.ffn_hidden = read_positive(in.required("ffn_hidden"), in.path_of("ffn_hidden"));
  in.finish();
  return moe;
}

ModelSpec read_spec(const Json& root, Diagnostics* diagnostics) {
  ObjectReader in(root, "", diagnostics);
  ModelSpec spec;
  spec.name = read_string(in.required("name"), "name");
  spec.layers = read_positive(in.required("layers"), "layers");
  spec.hidden = read_positive(in.required("hidden"), "hidden");
  spec.heads = read_positive(in.required("heads"), "heads");
  if (const Json* v = in.find("kv_heads")) spec.kv_heads = read_positive(*v, "kv_heads");
  if (const Json* v = in.find("ffn_hidden")) spec.ffn_hidden = read_positive(*v, "ffn_hidden");
  spec.vocab = read_positive(in.required("vocab"), "vocab");
  spec.seq_len = read_positive(in.required("seq_len"), "seq_len");
  if (const Json* v = in.find("dtype")) spec.dtype = read_enum(kPrecisionNames, *v, "dtype");
  if (const Json* v = in.find("tied_embeddings")) {
    spec.tied_embeddings = read_bool(*v, "tied_embeddings");
  }
  if (const Json* v = in.find("moe")) spec.moe = read_moe(*v, "moe", diagnostics);
  if (const Json* v = in.find("mlp")) spec.mlp = read_enum(kMlpNames, *v, "mlp");
  in.finish();
  return spec;
}

std::pair<std::size_t, std::size_t> line_and_column(std::string_view text, std::size_t byte) {
  std::size_t line = 1;
  std::size_t column = 1;
  for (std::size_t i = 0; i + 1 < byte && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

// Drops nlohmann's "[json.exception...] parse error at line 3, column 5: " prefix: the position
// is already in our own.
std::string short_reason(std::string what) {
  if (what.starts_with("[json.exception.")) what.erase(0, what.find("] ") + 2);
  if (what.starts_with("parse error")) what.erase(0, what.find(": ") + 2);
  return what;
}

Json parse(std::string_view text, const std::string& source) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    const auto [line, column] = line_and_column(text, e.byte);
    throw ParseError(source, line, column, "malformed JSON: " + short_reason(e.what()));
  } catch (const Json::exception& e) {
    throw ParseError(source, 0, 0, "malformed JSON: " + short_reason(e.what()));
  }
}

}  // namespace

std::string_view to_string(Precision precision) noexcept {
  return name_of(kPrecisionNames, precision);
}

std::optional<Precision> parse_precision(std::string_view name) noexcept {
  return parse_name(kPrecisionNames, name);
}

std::string_view to_string(MlpKind kind) noexcept { return name_of(kMlpNames, kind); }

std::optional<MlpKind> parse_mlp_kind(std::string_view name) noexcept {
  return parse_name(kMlpNames, name);
}

void validate(const ModelSpec& spec) {
  const std::vector<std::string> problems = find_problems(spec);
  const std::string where = "invalid model \"" + spec.name + "\"";
  if (problems.size() == 1) throw InvalidConfig(where + ": " + problems.front());
  if (!problems.empty()) {
    throw InvalidConfig(format_problem_list(
        where + ": " + std::to_string(problems.size()) + " problems", problems));
  }
}

std::string to_json(const ModelSpec& spec) {
  Json out = {
      {"name", spec.name}, {"layers", spec.layers}, {"hidden", spec.hidden}, {"heads", spec.heads}};
  if (spec.kv_heads) out["kv_heads"] = *spec.kv_heads;
  if (spec.ffn_hidden) out["ffn_hidden"] = *spec.ffn_hidden;
  out["vocab"] = spec.vocab;
  out["seq_len"] = spec.seq_len;
  out["dtype"] = to_string(spec.dtype);
  out["tied_embeddings"] = spec.tied_embeddings;
  if (spec.moe) {
    out["moe"] = {{"experts", spec.moe->experts},
                  {"top_k", spec.moe->top_k},
                  {"ffn_hidden", spec.moe->ffn_hidden}};
  }
  out["mlp"] = to_string(spec.mlp);
  try {
    return out.dump() + "\n";
  } catch (const Json::type_error& e) {
    // Only a name that is not valid UTF-8 gets here.
    throw InvalidConfig("model \"" + spec.name +
                        "\": cannot write JSON: " + short_reason(e.what()));
  }
}

ModelSpec model_from_json(std::string_view text, const std::string& source,
                          Diagnostics* diagnostics) {
  const Json root = parse(text, source);
  ModelSpec spec;
  try {
    spec = read_spec(root, diagnostics);
  } catch (const PathError& e) {
    throw ParseError(source, 0, 0, e.path + ": " + e.what);
  }
  validate(spec);
  return spec;
}

}  // namespace metron::models
