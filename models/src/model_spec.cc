// ModelSpec: names of its enums, validation, and the JSON form (Note [model JSON]).

#include "metron/models/model_spec.h"

#include <algorithm>
#include <array>
#include <limits>
#include <utility>
#include <vector>

#include "json_reading.h"
#include "metron/base/error.h"
#include "metron/models/limits.h"
#include "spec_checks.h"

namespace metron::models {
namespace {

// ordered_json keeps keys in insertion order (canonical output) and in document order when
// reading, so unknown keys are reported in the order they appear.
using detail::brief;
using detail::check_at_most;
using detail::check_divisible;
using detail::check_positive;
using detail::fail;
using detail::Json;
using detail::name_of;
using detail::ObjectReader;
using detail::parse_name;
using detail::read_bool;
using detail::read_enum;
using detail::read_positive_integer;
using detail::read_string;

constexpr detail::EnumNames<Precision, 4> kPrecisionNames{{{Precision::kBf16, "bf16"},
                                                           {Precision::kFp16, "fp16"},
                                                           {Precision::kFp32, "fp32"},
                                                           {Precision::kFp8, "fp8"}}};
constexpr detail::EnumNames<MlpKind, 3> kMlpNames{{{MlpKind::kGelu, "gelu"},
                                                   {MlpKind::kSwiglu, "swiglu"},
                                                   {MlpKind::kSquaredRelu, "squared-relu"}}};

std::vector<std::string> find_problems(const ModelSpec& spec) {
  std::vector<std::string> problems;
  check_positive(problems, "layers", spec.layers);
  check_positive(problems, "hidden", spec.hidden);
  check_positive(problems, "heads", spec.heads);
  check_positive(problems, "kv_heads", spec.num_kv_heads());
  // ffn_size() is 4·hidden when unset: only computed once hidden is known not to overflow it.
  const bool ffn_known = spec.ffn_hidden || spec.hidden <= kMaxWidth;
  if (ffn_known) check_positive(problems, "ffn_hidden", spec.ffn_size());
  check_positive(problems, "vocab", spec.vocab);
  check_positive(problems, "seq_len", spec.seq_len);
  // Note [input limits]: sizes far beyond any real model are refused before they size anything.
  check_at_most(problems, "layers", spec.layers, kMaxLayers, "the limit of layers");
  check_at_most(problems, "hidden", spec.hidden, kMaxWidth, "the limit of widths");
  check_at_most(problems, "heads", spec.heads, kMaxWidth, "the limit of widths");
  check_at_most(problems, "kv_heads", spec.num_kv_heads(), kMaxWidth, "the limit of widths");
  if (ffn_known) {
    check_at_most(problems, "ffn_hidden", spec.ffn_size(), 4 * kMaxWidth,
                  "the limit of feed-forward widths, 4x that of widths");
  }
  check_at_most(problems, "vocab", spec.vocab, kMaxVocab, "the limit of vocabularies");
  check_positive(problems, "make_vocab_size_divisible_by", spec.vocab_divisor());
  check_at_most(problems, "make_vocab_size_divisible_by", spec.vocab_divisor(), kMaxWidth,
                "the limit of widths");
  check_at_most(problems, "seq_len", spec.seq_len, kMaxSeqLen, "the limit of sequence lengths");
  check_divisible(problems, "hidden", spec.hidden, "heads", spec.heads);
  check_divisible(problems, "heads", spec.heads, "kv_heads", spec.num_kv_heads());
  if (spec.moe) {
    check_positive(problems, "moe.experts", spec.moe->experts);
    check_positive(problems, "moe.top_k", spec.moe->top_k);
    check_positive(problems, "moe.ffn_hidden", spec.moe->ffn_hidden);
    check_at_most(problems, "moe.experts", spec.moe->experts, kMaxExperts, "the limit of experts");
    check_at_most(problems, "moe.ffn_hidden", spec.moe->ffn_hidden, kMaxWidth,
                  "the limit of widths");
    if (spec.moe->top_k > spec.moe->experts) {
      problems.push_back("moe.top_k (" + std::to_string(spec.moe->top_k) +
                         ") must be <= moe.experts (" + std::to_string(spec.moe->experts) + ")");
    }
  }
  return problems;
}

MoeSpec read_moe(const Json& v, const std::string& path, Diagnostics* diagnostics) {
  ObjectReader in(v, path, diagnostics);
  MoeSpec moe;
  moe.experts = read_positive_integer(in.required("experts"), in.path_of("experts"));
  moe.top_k = read_positive_integer(in.required("top_k"), in.path_of("top_k"));
  moe.ffn_hidden = read_positive_integer(in.required("ffn_hidden"), in.path_of("ffn_hidden"));
  in.finish();
  return moe;
}

ModelSpec read_spec(const Json& root, Diagnostics* diagnostics) {
  ObjectReader in(root, "", diagnostics);
  ModelSpec spec;
  spec.name = read_string(in.required("name"), "name");
  spec.layers = read_positive_integer(in.required("layers"), "layers");
  spec.hidden = read_positive_integer(in.required("hidden"), "hidden");
  spec.heads = read_positive_integer(in.required("heads"), "heads");
  if (const Json* v = in.find("kv_heads")) spec.kv_heads = read_positive_integer(*v, "kv_heads");
  if (const Json* v = in.find("ffn_hidden"))
    spec.ffn_hidden = read_positive_integer(*v, "ffn_hidden");
  spec.vocab = read_positive_integer(in.required("vocab"), "vocab");
  spec.seq_len = read_positive_integer(in.required("seq_len"), "seq_len");
  if (const Json* v = in.find("dtype")) spec.dtype = read_enum(kPrecisionNames, *v, "dtype");
  if (const Json* v = in.find("tied_embeddings")) {
    spec.tied_embeddings = read_bool(*v, "tied_embeddings");
  }
  if (const Json* v = in.find("moe")) spec.moe = read_moe(*v, "moe", diagnostics);
  if (const Json* v = in.find("mlp")) spec.mlp = read_enum(kMlpNames, *v, "mlp");
  if (const Json* v = in.find("make_vocab_size_divisible_by")) {
    spec.make_vocab_size_divisible_by = read_positive_integer(*v, "make_vocab_size_divisible_by");
  }
  in.finish();
  return spec;
}

}  // namespace

std::string_view to_string(Precision precision) noexcept {
  return name_of(kPrecisionNames, precision);
}

std::optional<Precision> parse_precision(std::string_view name) noexcept {
  return parse_name(kPrecisionNames, name);
}

double element_bytes(Precision precision) noexcept {
  switch (precision) {
    case Precision::kFp32:
      return 4;
    case Precision::kFp8:
      return 1;
    case Precision::kBf16:
    case Precision::kFp16:
      break;
  }
  return 2;
}

std::string_view to_string(MlpKind kind) noexcept { return name_of(kMlpNames, kind); }

std::optional<MlpKind> parse_mlp_kind(std::string_view name) noexcept {
  return parse_name(kMlpNames, name);
}

bool has_linear_biases(const ModelSpec& spec) noexcept { return spec.mlp == MlpKind::kGelu; }

bool has_norm_biases(const ModelSpec& spec) noexcept { return spec.mlp != MlpKind::kSwiglu; }

bool has_dropout(const ModelSpec& spec) noexcept { return spec.mlp == MlpKind::kGelu; }

bool has_learned_positions(const ModelSpec& spec) noexcept { return spec.mlp == MlpKind::kGelu; }

void validate(const ModelSpec& spec) {
  detail::throw_if_problems("invalid model \"" + spec.name + "\"", find_problems(spec));
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
  if (spec.make_vocab_size_divisible_by) {
    out["make_vocab_size_divisible_by"] = *spec.make_vocab_size_divisible_by;
  }
  return detail::dump_line(out, "model \"" + spec.name + "\"");
}

ModelSpec model_from_json(std::string_view text, const std::string& source,
                          Diagnostics* diagnostics) {
  ModelSpec spec = detail::read_document(
      text, source, [&](const Json& root) { return read_spec(root, diagnostics); });
  validate(spec);
  return spec;
}

}  // namespace metron::models
