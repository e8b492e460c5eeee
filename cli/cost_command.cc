#include "cost_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "integer_flags.h"
#include "layer_split_flags.h"
#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/models/compute_cost.h"
#include "metron/models/memory_model.h"
#include "metron/models/parameter_count.h"
#include "metron/models/stage_cost_model.h"
#include "number_format.h"
#include "spec_loading.h"

namespace metron::cli {
namespace {

using Json = nlohmann::ordered_json;

struct CostOptions {
  std::string model = "gpt3-175b";
  std::string hardware = "dgx-h100";
  std::string profile;
  std::int64_t tp = 1;
  std::int64_t pp = 1;
  LayerSplitFlags layer_split;
  std::int64_t dp = 1;
  std::int64_t cp = 1;
  std::int64_t ep = 1;
  bool sp = false;
  std::int64_t microbatch_size = 1;
  std::optional<std::int64_t> seq;
  std::string recompute = "none";
  std::string attention = "unfused";
  std::string fp8 = "off";
  std::string policy = "ddp";
  bool ops = false;
  bool json = false;
  std::string output;
};

constexpr models::ComputePhase kLayerPhases[] = {
    models::ComputePhase::kForward, models::ComputePhase::kBackwardInput,
    models::ComputePhase::kBackwardWeight, models::ComputePhase::kBackward,
    models::ComputePhase::kRecompute};

/// Everything the command reports, computed once and rendered as text or JSON.
struct CostReport {
  models::ModelSpec model;
  models::HardwareSpec hardware;
  models::ParallelSpec parallel;
  models::StatePolicy policy = models::StatePolicy::kDdp;
  models::LayerShape shape;
  double peak = 0;

  struct Phase {
    std::string name;
    std::vector<models::OpCost> ops;
    models::PhaseCost cost;
  };
  std::vector<Phase> layer;      // per layer phase
  std::vector<Phase> embedding;  // forward, backward-weight
  std::vector<Phase> head;       // forward, backward-input, backward-weight
  double activation_bytes = 0;
  double embedding_activation_bytes = 0;
  double head_activation_bytes = 0;

  struct Rank {
    std::string name;
    std::int64_t index = 0;
    std::int64_t layers = 0;
    models::RankParameters parameters;
    models::StateBytes state;
    models::PhaseCost optimizer;
  };
  std::vector<Rank> ranks;
};

models::ParallelSpec parallel_of(const CostOptions& o) {
  models::ParallelSpec p{
      .tp = o.tp,
      .pp = o.pp,
      .dp = o.dp,
      .cp = o.cp,
      .ep = o.ep,
      .sequence_parallel = o.sp,
      .microbatch_size = o.microbatch_size,
      // One microbatch per replica: the per-layer breakdown does not depend on the count.
      .num_microbatches = 1,
      .seq_len = o.seq,
      .recompute = *models::parse_recompute(o.recompute),
      .attention = *models::parse_attention_kernel(o.attention),
      .fp8 = *models::parse_fp8_recipe(o.fp8)};
  apply_layer_split(o.layer_split, p);
  return p;
}

CostReport::Phase phase_of(std::string name, std::vector<models::OpCost> ops,
                           const models::ComputeModel& compute) {
  models::PhaseCost cost = compute.cost(ops);
  return {std::move(name), std::move(ops), cost};
}

CostReport build_report(const CostOptions& o, const models::ModelSpec& model,
                        const models::ComputeModel& compute) {
  CostReport r;
  r.model = model;
  r.hardware = compute.hardware();
  r.parallel = parallel_of(o);
  r.policy = *models::parse_state_policy(o.policy);
  models::validate(r.parallel, r.model);
  r.peak = *r.hardware.gpu.peak(r.model.dtype);
  r.shape = models::layer_shape(r.model, r.parallel);

  for (models::ComputePhase phase : kLayerPhases) {
    r.layer.push_back(phase_of(std::string(to_string(phase)),
                               models::layer_ops(r.model, r.shape, phase, r.parallel.recompute),
                               compute));
  }
  for (models::ComputePhase phase :
       {models::ComputePhase::kForward, models::ComputePhase::kBackwardWeight}) {
    r.embedding.push_back(phase_of(std::string(to_string(phase)),
                                   models::embedding_ops(r.model, r.shape, phase), compute));
  }
  for (models::ComputePhase phase :
       {models::ComputePhase::kForward, models::ComputePhase::kBackwardInput,
        models::ComputePhase::kBackwardWeight}) {
    r.head.push_back(phase_of(std::string(to_string(phase)),
                              models::head_ops(r.model, r.shape, phase), compute));
  }
  r.activation_bytes = models::layer_activation_bytes(r.model, r.shape, r.parallel.recompute);
  r.embedding_activation_bytes = models::embedding_activation_bytes(r.model, r.shape);
  r.head_activation_bytes = models::head_activation_bytes(r.model, r.shape);

  // The first, a middle and the last pipeline rank: the only ones that can differ, unless every
  // rank's layers are listed (--pipeline-layers), when each rank is its own.
  const std::vector<std::int64_t> layers = models::pipeline_rank_layers(r.model, r.parallel);
  std::vector<std::pair<std::string, std::int64_t>> picks = {{"first", 0}};
  if (r.parallel.pipeline_layers.empty()) {
    if (o.pp > 2) picks.emplace_back("middle", o.pp / 2);
  } else {
    for (std::int64_t i = 1; i + 1 < o.pp; ++i) picks.emplace_back("middle", i);
  }
  if (o.pp > 1) picks.emplace_back("last", o.pp - 1);
  if (o.pp == 1) picks.front().first = "only";
  for (const auto& [name, index] : picks) {
    CostReport::Rank rank{
        .name = name, .index = index, .layers = layers[static_cast<std::size_t>(index)]};
    rank.parameters = models::rank_parameters(r.model, r.parallel, index);
    rank.state = models::state_memory(r.model, r.parallel, r.policy, index);
    rank.optimizer = models::optimizer_step_cost(r.model, r.parallel, r.policy, index, compute);
    r.ranks.push_back(rank);
  }
  return r;
}

// ---- text -------------------------------------------------------------------------------------

std::string gib(double bytes) { return fmt::format("{:.2f}", bytes / (1024.0 * 1024 * 1024)); }
std::string mib(double bytes) { return fmt::format("{:.1f}", bytes / (1024.0 * 1024)); }

std::string phase_row(const CostReport::Phase& p, double peak) {
  const double achieved = p.cost.seconds > 0 ? p.cost.flops / p.cost.seconds : 0;
  return fmt::format("  {:<18}{:>12.2f}{:>12.3f}{:>12.3f}{:>12.1f}{:>8.1f}%\n", p.name,
                     p.cost.flops / 1e9, p.cost.bytes / 1e9, p.cost.seconds * 1e3, achieved / 1e12,
                     100.0 * achieved / peak);
}

std::string phase_table(const std::vector<CostReport::Phase>& phases, double peak) {
  std::string out = fmt::format("  {:<18}{:>12}{:>12}{:>12}{:>12}{:>9}\n", "phase", "GFLOP",
                                "GB moved", "time ms", "TFLOP/s", "of peak");
  for (const auto& p : phases) out += phase_row(p, peak);
  return out;
}

std::string op_table(const CostReport::Phase& phase, const models::ComputeModel& compute) {
  std::string out = fmt::format("  {}:\n  {:<32}{:<14}{:>24}{:>11}{:>10}{:>7}{:>10}\n", phase.name,
                                "op", "kind", "shape", "GFLOP", "MB", "eff", "time us");
  for (const auto& op : phase.ops) {
    const std::string shape =
        op.kind == models::OpKind::kElementwise
            ? fmt::format("{}", op.m)
            : (op.batch > 1 ? fmt::format("{}x{}x{}x{}", op.batch, op.m, op.n, op.k)
                            : fmt::format("{}x{}x{}", op.m, op.n, op.k));
    // Efficiency is a GEMM's fraction of peak; element-wise ops run at memory speed instead.
    const std::string efficiency = op.kind == models::OpKind::kElementwise
                                       ? std::string("-")
                                       : fmt::format("{:.2f}", compute.gemm_efficiency(op));
    out += fmt::format("  {:<32}{:<14}{:>24}{:>11.3f}{:>10.2f}{:>7}{:>10.1f}\n", op.name,
                       to_string(op.kind), shape, op.flops / 1e9, op.bytes / 1e6, efficiency,
                       compute.op_time(op) * 1e6);
  }
  return out;
}

std::string render_text(const CostReport& r, const CostOptions& o,
                        const models::ComputeModel& compute) {
  const models::ParallelSpec& p = r.parallel;
  std::string out = fmt::format(
      "{} ({} parameters) on {} ({}, {} peak {:.1f} TFLOP/s)\n"
      "tp {}{}, cp {}, ep {}, microbatch {} x seq {}, recompute {}, {} attention{}\n\n",
      r.model.name, short_count(models::parameter_count(r.model)), r.hardware.name,
      r.hardware.gpu.name, to_string(r.model.dtype), r.peak / 1e12, p.tp,
      p.sp() ? " with sequence parallelism" : "", p.cp, p.ep, p.microbatch_size,
      p.sequence_length(r.model), to_string(p.recompute), to_string(p.attention),
      p.fp8 == models::Fp8Recipe::kOff ? "" : fmt::format(", fp8 ({} scaling)", to_string(p.fp8)));

  if (p.fp8 != models::Fp8Recipe::kOff) {
    // The FP8 GEMMs run against twice that peak, so a phase of mostly FP8 GEMMs can pass 100 %.
    // FP8 on a GPU without an fp8 peak was refused before this (ComputeModel::peak_for).
    out += fmt::format(
        "'of peak' is of the {} peak; the FP8 GEMMs run against the fp8 peak of "
        "{:.1f} TFLOP/s\n\n",
        to_string(r.model.dtype), r.hardware.gpu.peak(models::Precision::kFp8).value_or(0) / 1e12);
  }
  out += "One transformer layer, one microbatch, one GPU:\n" + phase_table(r.layer, r.peak);
  out +=
      fmt::format("  activations stored until the backward: {} MiB\n\n", mib(r.activation_bytes));
  out += "First stage extras (embedding):\n" + phase_table(r.embedding, r.peak);
  out += fmt::format("  activations: {} MiB\n\n", mib(r.embedding_activation_bytes));
  out += "Last stage extras (final norm, LM head, cross-entropy):\n" + phase_table(r.head, r.peak);
  out += fmt::format("  activations: {} MiB\n\n", mib(r.head_activation_bytes));

  const double capacity = static_cast<double>(r.hardware.gpu.hbm_capacity);
  out += fmt::format("Model state per GPU, pp {}, dp {}, policy {} (GiB; HBM {} GiB):\n", p.pp,
                     p.dp, to_string(r.policy), gib(capacity));
  out +=
      fmt::format("  {:<8}{:>6}{:>8}{:>14}{:>10}{:>10}{:>11}{:>10}{:>14}\n", "rank", "index",
                  "layers", "parameters", "weights", "grads", "optimizer", "total", "adam step ms");
  for (const auto& rank : r.ranks) {
    out +=
        fmt::format("  {:<8}{:>6}{:>8}{:>14}{:>10}{:>10}{:>11}{:>10}{:>14.3f}\n", rank.name,
                    rank.index, rank.layers, short_count(rank.parameters.total()),
                    gib(rank.state.weights), gib(rank.state.gradients), gib(rank.state.optimizer),
                    gib(rank.state.total()), rank.optimizer.seconds * 1e3);
  }
  if (o.ops) {
    out += "\nOps of one layer:\n";
    for (const auto& phase : r.layer) out += op_table(phase, compute);
  }
  return out;
}

// ---- JSON -------------------------------------------------------------------------------------

Json phase_json(const CostReport::Phase& p, const models::ComputeModel& compute, bool ops) {
  Json out = {{"phase", p.name},
              {"flops", p.cost.flops},
              {"bytes", p.cost.bytes},
              {"time_ms", p.cost.seconds * 1e3}};
  if (ops) {
    Json list = Json::array();
    for (const auto& op : p.ops) {
      list.push_back({{"name", op.name},
                      {"kind", to_string(op.kind)},
                      {"m", op.m},
                      {"n", op.n},
                      {"k", op.k},
                      {"batch", op.batch},
                      {"flops", op.flops},
                      {"bytes", op.bytes},
                      {"efficiency", compute.gemm_efficiency(op)},
                      {"time_ms", compute.op_time(op) * 1e3},
                      {"profile_key", op.profile_key()}});
    }
    out["ops"] = std::move(list);
  }
  return out;
}

Json phases_json(const std::vector<CostReport::Phase>& phases, const models::ComputeModel& compute,
                 bool ops) {
  Json out = Json::array();
  for (const auto& p : phases) out.push_back(phase_json(p, compute, ops));
  return out;
}

std::string render_json(const CostReport& r, const CostOptions& o,
                        const models::ComputeModel& compute) {
  Json ranks = Json::array();
  for (const auto& rank : r.ranks) {
    ranks.push_back({{"rank", rank.name},
                     {"pipeline_rank", rank.index},
                     {"layers", rank.layers},
                     {"parameters", rank.parameters.total()},
                     {"expert_parameters", rank.parameters.expert},
                     {"weight_bytes", rank.state.weights},
                     {"gradient_bytes", rank.state.gradients},
                     {"optimizer_bytes", rank.state.optimizer},
                     {"total_bytes", rank.state.total()},
                     {"optimizer_step_ms", rank.optimizer.seconds * 1e3}});
  }
  const Json out = {{"model", Json::parse(models::to_json(r.model))},
                    {"hardware", Json::parse(models::to_json(r.hardware))},
                    {"parallel", Json::parse(models::to_json(r.parallel))},
                    {"policy", to_string(r.policy)},
                    {"layer", phases_json(r.layer, compute, true)},
                    {"layer_activation_bytes", r.activation_bytes},
                    {"embedding", phases_json(r.embedding, compute, o.ops)},
                    {"embedding_activation_bytes", r.embedding_activation_bytes},
                    {"head", phases_json(r.head, compute, o.ops)},
                    {"head_activation_bytes", r.head_activation_bytes},
                    {"ranks", ranks}};
  return out.dump(2) + "\n";
}

std::string policy_names() {
  std::string out;
  for (auto policy :
       {models::StatePolicy::kDdp, models::StatePolicy::kMegatronDdp,
        models::StatePolicy::kMegatronDistopt, models::StatePolicy::kFairscaleSdp,
        models::StatePolicy::kZero1, models::StatePolicy::kZero2, models::StatePolicy::kZero3,
        models::StatePolicy::kFsdp1, models::StatePolicy::kFsdp2}) {
    out += (out.empty() ? "" : ", ") + std::string(to_string(policy));
  }
  return out;
}

void run(const CostOptions& o) {
  const models::ModelSpec model = load_model(o.model);
  std::optional<models::CostProfile> profile;
  if (!o.profile.empty()) profile = load_profile(o.profile);
  // Throws InvalidConfig when the GPU has no peak for the model's dtype.
  const models::ComputeModel compute(load_hardware(o.hardware), model.dtype,
                                     profile ? &*profile : nullptr);
  const CostReport report = build_report(o, model, compute);
  const std::string text =
      o.json ? render_json(report, o, compute) : render_text(report, o, compute);
  if (o.output.empty()) {
    std::cout << text;
  } else {
    write_file_atomically(o.output, text);
  }
}

}  // namespace

void add_cost_command(CLI::App& app) {
  auto o = std::make_shared<CostOptions>();
  CLI::App* cmd = app.add_subcommand(
      "cost",
      "What the cost and memory models predict for one transformer layer of MODEL on one GPU of\n"
      "HARDWARE: FLOPs, bytes moved and time of each phase (forward, backward-input,\n"
      "backward-weight, backward, recompute) and, with --ops, of every GEMM and element-wise op;\n"
      "the activations a microbatch stores; the first and last stages' extras; and the weight,\n"
      "gradient and optimizer memory of the pipeline ranks for --pp/--dp under --policy (the\n"
      "layers split evenly, or as --first/--last-stage-layers or --pipeline-layers say).\n"
      "Times come from a roofline with a size-dependent GEMM efficiency, or from --profile.");
  cmd->add_option("--model", o->model, "model preset or JSON file (see 'metron presets')")
      ->capture_default_str();
  cmd->add_option("--hardware", o->hardware,
                  "hardware preset or JSON file (see 'metron presets hardware')")
      ->capture_default_str();
  cmd->add_option("--profile", o->profile,
                  "cost-profile JSON whose measured entries replace the analytical times");
  cmd->add_option("--tp", o->tp, "tensor-parallel size")->capture_default_str();
  cmd->add_flag("--sp", o->sp, "sequence parallelism (Megatron; needs --tp > 1)");
  cmd->add_option("--cp", o->cp, "context-parallel size")->capture_default_str();
  cmd->add_option("--ep", o->ep, "expert-parallel size (MoE models)")->capture_default_str();
  cmd->add_option("--pp", o->pp, "pipeline-parallel size, for the per-rank memory")
      ->capture_default_str();
  add_layer_split_flags(*cmd, o->layer_split);
  cmd->add_option("--dp", o->dp, "data-parallel size, for the per-rank memory")
      ->capture_default_str();
  cmd->add_option("-b,--microbatch-size", o->microbatch_size, "samples per microbatch")
      ->capture_default_str();
  cmd->add_option("--seq", o->seq, "sequence length (default: the model's)");
  cmd->add_option("--recompute", o->recompute, "activation recomputation")
      ->check(CLI::IsMember({"none", "selective", "full"}))
      ->capture_default_str();
  cmd->add_option("--attention", o->attention,
                  "unfused (QK^T, softmax, dropout and ·V in memory) or fused (one flash-style\n"
                  "kernel, timed from the GPU's measured kernel table)")
      ->check(CLI::IsMember({"unfused", "fused"}))
      ->capture_default_str();
  cmd->add_option("--fp8", o->fp8,
                  "FP8 training (Transformer Engine): off, delayed or current scaling; the\n"
                  "linear GEMMs on the fp8 peak, with their casts")
      ->check(CLI::IsMember({"off", "delayed", "current"}))
      ->capture_default_str();
  cmd->add_option("--policy", o->policy,
                  "how data-parallel ranks hold model state: " + policy_names())
      ->check([](const std::string& name) {
        return models::parse_state_policy(name)
                   ? std::string()
                   : "unknown policy '" + name + "', expected one of " + policy_names();
      })
      ->capture_default_str();
  cmd->add_flag("--ops", o->ops, "also list every op of the layer (in JSON: of every part)");
  cmd->add_flag("--json", o->json, "JSON instead of tables");
  cmd->add_option("-o,--output", o->output, "write to this file (atomically) instead of stdout");
  check_integer_options(*cmd);
  cmd->callback([o] { run(*o); });
}

}  // namespace metron::cli
