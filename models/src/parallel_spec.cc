// ParallelSpec: names of its enums, the number of microbatches, validation against a model, and
// the JSON form (Note [parallel JSON]).

#include "metron/models/parallel_spec.h"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "json_reading.h"
#include "metron/base/error.h"
#include "metron/models/limits.h"
#include "spec_checks.h"

namespace metron::models {
namespace {

using detail::brief;
using detail::check_at_most;
using detail::check_divisible;
using detail::check_positive;
using detail::fail;
using detail::Json;
using detail::ObjectReader;
using detail::read_bool;
using detail::read_enum;
using detail::read_positive_integer;

constexpr detail::EnumNames<Recompute, 3> kRecomputeNames{
    {{Recompute::kNone, "none"}, {Recompute::kSelective, "selective"}, {Recompute::kFull, "full"}}};
constexpr detail::EnumNames<AttentionKernel, 2> kAttentionNames{
    {{AttentionKernel::kUnfused, "unfused"}, {AttentionKernel::kFused, "fused"}}};
constexpr detail::EnumNames<Fp8Recipe, 3> kFp8Names{
    {{Fp8Recipe::kOff, "off"}, {Fp8Recipe::kDelayed, "delayed"}, {Fp8Recipe::kCurrent, "current"}}};

struct Factor {
  std::string name;
  std::int64_t value = 0;
};

/// A product of sizes as messages show it: "tp (8)" for one factor, "pp·vp (16·4 = 64)" for
/// several, so that the user sees which keys multiply to the divisor.
struct Product {
  std::string text;
  std::optional<std::int64_t> value;  ///< nullopt when a factor is not positive or it overflows
};

Product product(std::initializer_list<Factor> factors) {
  std::string names;
  std::string values;
  std::optional<std::int64_t> total = 1;
  for (const Factor& f : factors) {
    names += (names.empty() ? "" : "·") + f.name;
    values += (values.empty() ? "" : "·") + std::to_string(f.value);
    std::int64_t next = 0;
    if (!total || f.value <= 0 || __builtin_mul_overflow(*total, f.value, &next)) {
      total = std::nullopt;
    } else {
      total = next;
    }
  }
  if (factors.size() == 1) return {names + " (" + values + ")", total};
  return {names + " (" + values + " = " + (total ? std::to_string(*total) : "overflow") + ")",
          total};
}

/// "<what> (n) must be divisible by <product>[ <when>]". Skipped when a factor is not positive
/// (check_positive reports that); an overflowing product exceeds any n, so it cannot divide it.
void check_divisible_by(std::vector<std::string>& problems, const std::string& what, std::int64_t n,
                        std::initializer_list<Factor> factors, const std::string& when = "") {
  for (const Factor& f : factors) {
    if (f.value <= 0) return;
  }
  const Product by = product(factors);
  if (n <= 0 || (by.value && n % *by.value == 0)) return;
  problems.push_back(what + " (" + std::to_string(n) + ") must be divisible by " + by.text +
                     (when.empty() ? "" : " " + when));
}

void check_sizes(std::vector<std::string>& problems, const ParallelSpec& spec) {
  check_positive(problems, "tp", spec.tp);
  check_positive(problems, "pp", spec.pp);
  check_positive(problems, "dp", spec.dp);
  check_positive(problems, "vp", spec.vp);
  check_positive(problems, "cp", spec.cp);
  check_positive(problems, "ep", spec.ep);
  check_positive(problems, "microbatch_size", spec.microbatch_size);
  if (spec.global_batch) check_positive(problems, "global_batch", *spec.global_batch);
  if (spec.num_microbatches) check_positive(problems, "num_microbatches", *spec.num_microbatches);
  if (spec.seq_len) check_positive(problems, "seq_len", *spec.seq_len);
}

// Note [input limits]: each size, and the products that size the graph, below its limit.
void check_limits(std::vector<std::string>& problems, const ParallelSpec& spec) {
  for (const Factor& f : {Factor{"tp", spec.tp}, Factor{"pp", spec.pp}, Factor{"dp", spec.dp},
                          Factor{"vp", spec.vp}, Factor{"cp", spec.cp}, Factor{"ep", spec.ep}}) {
    check_at_most(problems, f.name, f.value, kMaxGpus, "the limit of GPUs");
  }
  const Product gpus =
      product({{"tp", spec.tp}, {"pp", spec.pp}, {"dp", spec.dp}, {"cp", spec.cp}});
  if (spec.tp > 0 && spec.pp > 0 && spec.dp > 0 && spec.cp > 0 &&
      (!gpus.value || *gpus.value > kMaxGpus)) {
    problems.push_back(gpus.text + ": expected at most " + std::to_string(kMaxGpus) +
                       " (the limit of GPUs)");
  }
  check_at_most(problems, "microbatch_size", spec.microbatch_size, kMaxMicrobatchSize,
                "the limit of microbatch sizes");
  if (spec.global_batch) {
    check_at_most(problems, "global_batch", *spec.global_batch, kMaxGlobalBatch,
                  "the limit of global batches");
  }
  if (spec.num_microbatches) {
    check_at_most(problems, "num_microbatches", *spec.num_microbatches, kMaxMicrobatches,
                  "the limit of microbatches per iteration");
  }
  if (spec.seq_len) {
    check_at_most(problems, "seq_len", *spec.seq_len, kMaxSeqLen, "the limit of sequence lengths");
  }
  // Microbatches times stages is the number of forwards of a pipeline: it sizes the graph.
  const std::optional<std::int64_t> m = spec.microbatches();
  if (!m || *m <= 0 || *m > kMaxMicrobatches || spec.pp <= 0 || spec.vp <= 0) return;
  const Product actions = product({{"microbatches", *m}, {"pp", spec.pp}, {"vp", spec.vp}});
  if (!actions.value || *actions.value > kMaxPipelineActions) {
    problems.push_back(actions.text + ": expected at most " + std::to_string(kMaxPipelineActions) +
                       " (the limit of forwards per pipeline and iteration)");
  }
}

// Note [uneven stages]: each pipeline rank's layers, or nothing with the reasons in `problems`.
// pipeline_layers: pp counts, each positive and divisible by vp, adding up to the layers.
std::vector<std::int64_t> listed_layers(std::vector<std::string>& problems,
                                        const ParallelSpec& spec, const ModelSpec& model) {
  const std::size_t before = problems.size();
  const std::vector<std::int64_t>& list = spec.pipeline_layers;
  if (spec.first_stage_layers || spec.last_stage_layers) {
    problems.push_back(
        "pipeline_layers names every rank's layers; expected no first_stage_layers or "
        "last_stage_layers beside it");
  }
  if (std::ssize(list) != spec.pp) {
    problems.push_back("pipeline_layers has " + std::to_string(list.size()) +
                       " counts; expected one per pipeline rank, pp = " + std::to_string(spec.pp));
  }
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string name = "pipeline_layers[" + std::to_string(i) + "]";
    check_positive(problems, name, list[i]);
    check_at_most(problems, name, list[i], kMaxLayers, "the limit of layers");
    check_divisible_by(problems, name, list[i], {{"vp", spec.vp}});
    if (list[i] > 0 && list[i] <= kMaxLayers) sum += list[i];
  }
  if (problems.size() == before && sum != model.layers) {
    problems.push_back("pipeline_layers add up to " + std::to_string(sum) +
                       "; expected the model's layers (" + std::to_string(model.layers) + ")");
  }
  if (problems.size() != before) return {};
  return list;
}

bool accounted(const ParallelSpec& spec) {
  return spec.account_for_embedding_in_pipeline_split || spec.account_for_loss_in_pipeline_split;
}

// account_for_*: (layers + embedding + loss) / (pp·vp) per virtual stage, the first (last) one
// less for the embedding (loss), in the looped order; empty after a problem.
std::vector<std::int64_t> accounted_stage_layers(std::vector<std::string>& problems,
                                                 const ParallelSpec& spec, const ModelSpec& model) {
  if (spec.first_stage_layers || spec.last_stage_layers || !spec.pipeline_layers.empty()) {
    problems.push_back(
        "account_for_embedding/loss_in_pipeline_split split the layers themselves; expected no "
        "first_stage_layers, last_stage_layers or pipeline_layers beside them");
    return {};
  }
  const std::int64_t embedding = spec.account_for_embedding_in_pipeline_split ? 1 : 0;
  const std::int64_t loss = spec.account_for_loss_in_pipeline_split ? 1 : 0;
  const std::int64_t total = model.layers + embedding + loss;
  const std::int64_t stages = spec.pp * spec.vp;
  std::string what = "layers (" + std::to_string(model.layers) + ")";
  if (embedding != 0) what += " + embedding (1)";
  if (loss != 0) what += " + loss (1)";
  what += " = " + std::to_string(total);
  if (stages <= 0 || total % stages != 0) {
    problems.push_back(what + " must be divisible by pp·vp (" + std::to_string(spec.pp) + "·" +
                       std::to_string(spec.vp) + " = " + std::to_string(stages) + ")");
    return {};
  }
  const std::int64_t each = total / stages;
  std::vector<std::int64_t> out(static_cast<std::size_t>(stages), each);
  out.front() -= embedding;
  out.back() -= loss;
  if (*std::min_element(out.begin(), out.end()) < 1) {
    problems.push_back(what + " over pp·vp = " + std::to_string(stages) +
                       " leaves a virtual stage without a layer; expected at least one each");
    return {};
  }
  return out;
}

std::vector<std::int64_t> split_layers(std::vector<std::string>& problems, const ParallelSpec& spec,
                                       const ModelSpec& model) {
  const std::size_t before = problems.size();
  if (accounted(spec)) {
    const std::vector<std::int64_t> stages = accounted_stage_layers(problems, spec, model);
    if (stages.empty()) return {};
    std::vector<std::int64_t> ranks(static_cast<std::size_t>(spec.pp), 0);
    for (std::size_t s = 0; s < stages.size(); ++s) {
      ranks[s % static_cast<std::size_t>(spec.pp)] += stages[s];
    }
    return ranks;
  }
  if (!spec.pipeline_layers.empty()) return listed_layers(problems, spec, model);
  if (!spec.first_stage_layers && !spec.last_stage_layers) {
    check_divisible_by(problems, "layers", model.layers, {{"pp", spec.pp}, {"vp", spec.vp}});
    if (problems.size() != before || spec.pp <= 0 || model.layers <= 0) return {};
    return std::vector<std::int64_t>(static_cast<std::size_t>(spec.pp), model.layers / spec.pp);
  }
  std::string given;
  std::int64_t fixed = 0;
  std::int64_t others = spec.pp;
  for (const auto& [name, value] : {std::pair{"first_stage_layers", spec.first_stage_layers},
                                    std::pair{"last_stage_layers", spec.last_stage_layers}}) {
    if (!value) continue;
    check_positive(problems, name, *value);
    check_divisible_by(problems, name, *value, {{"vp", spec.vp}});
    given += (given.empty() ? "" : " - ") + std::string(name) + " (" + std::to_string(*value) + ")";
    fixed += *value;
    --others;
  }
  if (spec.pp <= 1) {
    problems.push_back(given + " needs pp > 1 (pp = " + std::to_string(spec.pp) + ")");
    return {};
  }
  if (problems.size() != before) return {};
  const std::int64_t rest = model.layers - fixed;
  const std::string rest_text =
      "layers (" + std::to_string(model.layers) + ") - " + given + " = " + std::to_string(rest);
  if (others == 0 && rest != 0) {
    problems.push_back(rest_text + "; expected 0, as the two ranks hold every layer");
  } else if (others > 0 && (rest < others || rest % others != 0)) {
    problems.push_back(rest_text + " must split evenly, at least one each, over the " +
                       std::to_string(others) + " other pipeline ranks");
  } else if (others > 0 && spec.vp > 0 && (rest / others) % spec.vp != 0) {
    problems.push_back("the other ranks' layers (" + std::to_string(rest / others) +
                       ") must be divisible by vp (" + std::to_string(spec.vp) + ")");
  }
  if (problems.size() != before) return {};
  std::vector<std::int64_t> out(static_cast<std::size_t>(spec.pp), others > 0 ? rest / others : 0);
  if (spec.first_stage_layers) out.front() = *spec.first_stage_layers;
  if (spec.last_stage_layers) out.back() = *spec.last_stage_layers;
  return out;
}

// Megatron's rules for splitting one replica of the model (megatron/training/arguments.py).
void check_model_split(std::vector<std::string>& problems, const ParallelSpec& spec,
                       const ModelSpec& model) {
  (void)split_layers(problems, spec, model);
  if (spec.vp > 1 && spec.pp == 1) {
    problems.push_back("vp (" + std::to_string(spec.vp) + ") needs pp > 1 (pp = 1)");
  }
  check_divisible(problems, "heads", model.heads, "tp", spec.tp);
  // kv_heads equal to heads is covered by the heads rule; one message per cause.
  if (model.num_kv_heads() != model.heads) {
    check_divisible(problems, "kv_heads", model.num_kv_heads(), "tp", spec.tp);
  }
  check_divisible(problems, "ffn_hidden", model.ffn_size(), "tp", spec.tp);
  const std::int64_t seq = spec.sequence_length(model);
  // Sequence parallelism splits each context-parallel rank's seq/cp tokens over tp, so with
  // cp > 1 the sequence must divide by cp·tp (seq 24, cp 4, tp 8 divides by both 8 and 2·cp
  // but leaves 6 tokens per cp rank for 8 tp ranks).
  if (spec.sp() && spec.cp > 1) {
    check_divisible_by(problems, "seq_len", seq, {{"cp", spec.cp}, {"tp", spec.tp}},
                       "with sequence_parallel");
  } else if (spec.sp()) {
    check_divisible_by(problems, "seq_len", seq, {{"tp", spec.tp}}, "with sequence_parallel");
  }
  // megatron/training/arguments.py: "Tensor parallel communication/GEMM overlap can happen only
  // when sequence parallelism is enabled".
  if (spec.tp_comm_overlap && spec.tp > 1 && !spec.sequence_parallel) {
    problems.push_back(
        "tp_comm_overlap needs sequence_parallel (Megatron overlaps the "
        "all-gathers and reduce-scatters of sequence parallelism)");
  }
  // Transformer Engine casts bf16, fp16 or fp32 weights and activations into FP8 for its GEMMs;
  // a model already in fp8 has nothing to cast.
  if (spec.fp8 != Fp8Recipe::kOff && model.dtype == Precision::kFp8) {
    problems.push_back("fp8 \"" + std::string(to_string(spec.fp8)) +
                       "\" needs a model dtype of bf16, fp16 or fp32 to cast from, got fp8");
  }
  // Context parallelism cuts the sequence into 2·cp chunks, rank i taking chunks i and
  // 2·cp−1−i, so that causal attention's work is balanced (Megatron's get_batch_on_this_cp_rank).
  if (spec.cp > 1) {
    check_divisible_by(problems, "seq_len", seq, {{"2", 2}, {"cp", spec.cp}}, "with cp > 1");
  }
}

void check_batch(std::vector<std::string>& problems, const ParallelSpec& spec) {
  if (!spec.global_batch && !spec.num_microbatches) {
    problems.push_back("global_batch or num_microbatches must be set");
    return;
  }
  if (!spec.global_batch || *spec.global_batch <= 0) return;
  const std::size_t before = problems.size();
  const std::initializer_list<Factor> per_step = {{"microbatch_size", spec.microbatch_size},
                                                  {"dp", spec.dp}};
  check_divisible_by(problems, "global_batch", *spec.global_batch, per_step);
  const Product step = product(per_step);
  if (problems.size() != before || !step.value || !spec.num_microbatches) return;
  const std::int64_t implied = *spec.global_batch / *step.value;
  if (*spec.num_microbatches > 0 && *spec.num_microbatches != implied) {
    problems.push_back("num_microbatches (" + std::to_string(*spec.num_microbatches) +
                       ") must equal global_batch / (microbatch_size·dp) (" +
                       std::to_string(*spec.global_batch) + " / (" +
                       std::to_string(spec.microbatch_size) + "·" + std::to_string(spec.dp) +
                       ") = " + std::to_string(implied) + ")");
  }
}

// Megatron carves the expert-parallel ranks out of the dp·cp ranks of one tp/pp position.
void check_experts(std::vector<std::string>& problems, const ParallelSpec& spec,
                   const ModelSpec& model) {
  if (spec.ep > 1 && !model.moe) {
    problems.push_back("ep (" + std::to_string(spec.ep) +
                       ") needs a mixture-of-experts model (\"moe\" in the model)");
  }
  if (model.moe) check_divisible(problems, "moe.experts", model.moe->experts, "ep", spec.ep);
  if (spec.ep > 1) {
    const Product dp_cp = product({{"dp", spec.dp}, {"cp", spec.cp}});
    if (dp_cp.value && *dp_cp.value % spec.ep != 0) {
      problems.push_back(dp_cp.text + " must be divisible by ep (" + std::to_string(spec.ep) + ")");
    }
  }
}

void check_gpus(std::vector<std::string>& problems, const ParallelSpec& spec, std::int64_t gpus) {
  const Product needed =
      product({{"tp", spec.tp}, {"pp", spec.pp}, {"dp", spec.dp}, {"cp", spec.cp}});
  if (!needed.value || *needed.value != gpus) {
    problems.push_back("gpus (" + std::to_string(gpus) + ") must equal " + needed.text);
  }
}

void read_size(ObjectReader& in, std::string_view key, std::int64_t& out) {
  if (const Json* v = in.find(key)) out = read_positive_integer(*v, in.path_of(key));
}

// null is how to_json writes an unset optional, so it reads back as unset.
void read_optional_size(ObjectReader& in, std::string_view key, std::optional<std::int64_t>& out) {
  const Json* v = in.find(key);
  if (v == nullptr || v->is_null()) return;
  out = read_positive_integer(*v, in.path_of(key));
}

// A list of positive layer counts, no longer than a model's layers can be.
std::vector<std::int64_t> read_layer_list(const Json& v, const std::string& path) {
  if (!v.is_array() || v.empty()) {
    fail(path, "expected a list of positive layer counts, one per pipeline rank, got " + brief(v));
  }
  if (std::ssize(v) > kMaxLayers) {
    fail(path, "expected at most " + std::to_string(kMaxLayers) +
                   " counts (the limit of layers), got " + std::to_string(v.size()));
  }
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    out.push_back(read_positive_integer(v[i], path + "[" + std::to_string(i) + "]"));
  }
  return out;
}

ParallelSpec read_spec(const Json& root, Diagnostics* diagnostics) {
  ObjectReader in(root, "", diagnostics);
  ParallelSpec spec;
  read_size(in, "tp", spec.tp);
  read_size(in, "pp", spec.pp);
  read_size(in, "dp", spec.dp);
  read_size(in, "vp", spec.vp);
  read_size(in, "cp", spec.cp);
  read_size(in, "ep", spec.ep);
  if (const Json* v = in.find("sequence_parallel")) {
    spec.sequence_parallel = read_bool(*v, "sequence_parallel");
  }
  read_size(in, "microbatch_size", spec.microbatch_size);
  read_optional_size(in, "global_batch", spec.global_batch);
  read_optional_size(in, "num_microbatches", spec.num_microbatches);
  read_optional_size(in, "seq_len", spec.seq_len);
  if (const Json* v = in.find("recompute")) {
    spec.recompute = read_enum(kRecomputeNames, *v, "recompute");
  }
  if (const Json* v = in.find("attention")) {
    spec.attention = read_enum(kAttentionNames, *v, "attention");
  }
  if (const Json* v = in.find("tp_comm_overlap")) {
    spec.tp_comm_overlap = read_bool(*v, "tp_comm_overlap");
  }
  if (const Json* v = in.find("fp8")) spec.fp8 = read_enum(kFp8Names, *v, "fp8");
  if (const Json* v = in.find("scatter_gather_p2p")) {
    spec.scatter_gather_p2p = read_bool(*v, "scatter_gather_p2p");
  }
  read_optional_size(in, "first_stage_layers", spec.first_stage_layers);
  read_optional_size(in, "last_stage_layers", spec.last_stage_layers);
  if (const Json* v = in.find("pipeline_layers"); v != nullptr && !v->is_null()) {
    spec.pipeline_layers = read_layer_list(*v, in.path_of("pipeline_layers"));
  }
  for (const auto& [key, field] :
       {std::pair{"account_for_embedding_in_pipeline_split",
                  &ParallelSpec::account_for_embedding_in_pipeline_split},
        std::pair{"account_for_loss_in_pipeline_split",
                  &ParallelSpec::account_for_loss_in_pipeline_split}}) {
    if (const Json* v = in.find(key)) spec.*field = read_bool(*v, key);
  }
  in.finish();
  return spec;
}

Json optional_json(const std::optional<std::int64_t>& value) {
  return value ? Json(*value) : Json(nullptr);
}

}  // namespace

std::string_view to_string(Recompute recompute) noexcept {
  return detail::name_of(kRecomputeNames, recompute);
}

std::optional<Recompute> parse_recompute(std::string_view name) noexcept {
  return detail::parse_name(kRecomputeNames, name);
}

std::string_view to_string(AttentionKernel kernel) noexcept {
  return detail::name_of(kAttentionNames, kernel);
}

std::optional<AttentionKernel> parse_attention_kernel(std::string_view name) noexcept {
  return detail::parse_name(kAttentionNames, name);
}

std::string_view to_string(Fp8Recipe recipe) noexcept { return detail::name_of(kFp8Names, recipe); }

std::optional<Fp8Recipe> parse_fp8_recipe(std::string_view name) noexcept {
  return detail::parse_name(kFp8Names, name);
}

std::optional<std::int64_t> ParallelSpec::microbatches() const {
  if (num_microbatches) return num_microbatches;
  std::int64_t per_step = 0;
  if (!global_batch || microbatch_size <= 0 || dp <= 0 ||
      __builtin_mul_overflow(microbatch_size, dp, &per_step) || *global_batch % per_step != 0) {
    return std::nullopt;
  }
  return *global_batch / per_step;
}

void validate(const ParallelSpec& spec, const ModelSpec& model, std::optional<std::int64_t> gpus) {
  std::vector<std::string> problems;
  check_sizes(problems, spec);
  check_limits(problems, spec);
  check_model_split(problems, spec, model);
  check_batch(problems, spec);
  check_experts(problems, spec, model);
  if (gpus) check_gpus(problems, spec, *gpus);
  detail::throw_if_problems("invalid parallel configuration for model \"" + model.name + "\"",
                            problems);
}

std::vector<std::int64_t> pipeline_rank_layers(const ModelSpec& model, const ParallelSpec& spec) {
  std::vector<std::string> problems;
  check_sizes(problems, spec);
  std::vector<std::int64_t> layers;
  if (problems.empty()) layers = split_layers(problems, spec, model);
  detail::throw_if_problems("invalid parallel configuration for model \"" + model.name + "\"",
                            problems);
  return layers;
}

std::vector<std::int64_t> virtual_stage_layers(const ModelSpec& model, const ParallelSpec& spec) {
  const std::vector<std::int64_t> ranks = pipeline_rank_layers(model, spec);
  if (accounted(spec)) {
    std::vector<std::string> problems;
    return accounted_stage_layers(problems, spec, model);  // checked by pipeline_rank_layers
  }
  std::vector<std::int64_t> out;
  for (std::int64_t s = 0; s < spec.pp * spec.vp; ++s) {
    const std::int64_t layers = ranks[static_cast<std::size_t>(s % spec.pp)];
    if (layers % spec.vp != 0) {
      throw InvalidConfig("pipeline rank " + std::to_string(s % spec.pp) + "'s layers (" +
                          std::to_string(layers) + ") must be divisible by vp (" +
                          std::to_string(spec.vp) + ")");
    }
    out.push_back(layers / spec.vp);
  }
  return out;
}

void validate_sizes(const ParallelSpec& spec) {
  std::vector<std::string> problems;
  check_sizes(problems, spec);
  check_limits(problems, spec);
  detail::throw_if_problems("invalid parallel configuration", problems);
}

std::string to_json(const ParallelSpec& spec) {
  Json out;
  out["tp"] = spec.tp;
  out["pp"] = spec.pp;
  out["dp"] = spec.dp;
  out["vp"] = spec.vp;
  out["cp"] = spec.cp;
  out["ep"] = spec.ep;
  out["sequence_parallel"] = spec.sequence_parallel;
  out["microbatch_size"] = spec.microbatch_size;
  out["global_batch"] = optional_json(spec.global_batch);
  out["num_microbatches"] = optional_json(spec.num_microbatches);
  out["seq_len"] = optional_json(spec.seq_len);
  out["recompute"] = to_string(spec.recompute);
  out["attention"] = to_string(spec.attention);
  out["tp_comm_overlap"] = spec.tp_comm_overlap;
  out["fp8"] = to_string(spec.fp8);
  out["scatter_gather_p2p"] = spec.scatter_gather_p2p;
  out["first_stage_layers"] = optional_json(spec.first_stage_layers);
  out["last_stage_layers"] = optional_json(spec.last_stage_layers);
  if (!spec.pipeline_layers.empty()) out["pipeline_layers"] = spec.pipeline_layers;
  if (spec.account_for_embedding_in_pipeline_split) {
    out["account_for_embedding_in_pipeline_split"] = true;
  }
  if (spec.account_for_loss_in_pipeline_split) out["account_for_loss_in_pipeline_split"] = true;
  return detail::dump_line(out, "parallel configuration");
}

ParallelSpec parallel_from_json(std::string_view text, const std::string& source,
                                Diagnostics* diagnostics) {
  return detail::read_document(text, source,
                               [&](const Json& root) { return read_spec(root, diagnostics); });
}

}  // namespace metron::models
