#include "scenario_flags.h"

#include <limits>

#include "integer_flags.h"
#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/pipeline/registry.h"
#include "spec_loading.h"

namespace metron::cli {

void add_scenario_flags(CLI::App& cmd, ScenarioFlags& o) {
  cmd.add_option("scenario", o.scenario_file, "scenario JSON (see README: Scenario format)");
  cmd.add_option("--model", o.model, "model preset or JSON file");
  cmd.add_option("--hardware", o.hardware,
                 "hardware preset or JSON file (a spec, or the document 'metron profile --sweep'\n"
                 "writes)");
  cmd.add_option("--gpus", o.gpus, "GPUs in all (default tp·pp·dp·cp)");
  cmd.add_option("--tp", o.tp, "tensor-parallel size");
  cmd.add_option("--pp", o.pp, "pipeline-parallel size");
  cmd.add_option("--dp", o.dp, "data-parallel size (default: what the GPUs leave)");
  cmd.add_option("--vp", o.vp, "model chunks per pipeline rank (interleaving)");
  add_layer_split_flags(cmd, o.layer_split);
  cmd.add_option("--cp", o.cp, "context-parallel size");
  cmd.add_option("--ep", o.ep, "expert-parallel size");
  cmd.add_flag("--sp", o.sp, "sequence parallelism on");
  cmd.add_flag("--no-sp", o.no_sp, "sequence parallelism off");
  cmd.add_option("-b,--microbatch-size", o.microbatch_size, "samples per microbatch");
  cmd.add_option("--global-batch", o.global_batch, "samples per iteration, all replicas");
  cmd.add_option("-m,--microbatches", o.microbatches, "microbatches per pipeline");
  cmd.add_option("--seq", o.seq, "sequence length");
  cmd.add_option("--recompute", o.recompute, "none, selective or full")
      ->check(CLI::IsMember({"none", "selective", "full"}));
  cmd.add_option("--attention", o.attention,
                 "unfused (Megatron's own kernels: scores in memory) or fused (a flash-style\n"
                 "kernel, as Transformer Engine runs by default)")
      ->check(CLI::IsMember({"unfused", "fused"}));
  cmd.add_flag("--tp-comm-overlap", o.tp_comm_overlap,
               "Megatron's --tp-comm-overlap: pipeline the tensor-parallel all-gathers and\n"
               "reduce-scatters with their GEMMs (needs --sp)");
  cmd.add_flag("--no-tp-comm-overlap", o.no_tp_comm_overlap,
               "tensor-parallel collectives between the GEMMs");
  cmd.add_flag("--scatter-gather-p2p", o.scatter_gather_p2p,
               "Megatron-LM 2.x's pipeline scatter/gather (its default then, gone from\n"
               "Megatron-Core): each tensor-parallel rank sends 1/tp of the boundary tensor\n"
               "and the next stage all-gathers it over NVLink (no effect with --sp)");
  cmd.add_flag("--no-scatter-gather-p2p", o.no_scatter_gather_p2p,
               "every tensor-parallel rank sends the whole boundary tensor");
  cmd.add_option("--fp8", o.fp8,
                 "FP8 training as Transformer Engine runs it: off, delayed (DelayedScaling,\n"
                 "Megatron's default recipe) or current (Float8CurrentScaling); the layers'\n"
                 "linear GEMMs in FP8 with their casts, attention and the LM head in the\n"
                 "model's dtype (needs a GPU with an fp8 peak, e.g. dgx-h100)")
      ->check(CLI::IsMember({"off", "delayed", "current"}));
  cmd.add_option("--schedule", o.schedule, "pipeline schedule (see 'metron schedule --help')");
  cmd.add_option("--group-size", o.group_size, "interleaved 1F1B's microbatch group size N")
      ->check(integer_in(1, std::numeric_limits<std::int32_t>::max()));
  cmd.add_option("--memory-limit", o.memory_limit, "zb-auto's memory limit")
      ->check(integer_in(1, std::numeric_limits<std::int32_t>::max()));
  cmd.add_option("--p2p", o.p2p, "batched (Megatron's default) or async")
      ->check(CLI::IsMember({"batched", "async"}));
  add_sync_flags(cmd, o.sync);
  cmd.add_option("--profile", o.profile,
                 "cost-profile JSON ('metron profile' writes one) whose measured times replace\n"
                 "the cost models' entry by entry");
}

scenario::Scenario scenario_of(const ScenarioFlags& o, const scenario::Scenario& base) {
  scenario::Scenario s = o.scenario_file.empty() ? base
                                                 : scenario::scenario_from_json(
                                                       read_file(o.scenario_file), o.scenario_file);
  if (o.model) s.model = load_model(*o.model);
  if (o.hardware) s.hardware = load_hardware(*o.hardware);
  models::ParallelSpec& p = s.parallel;
  if (o.tp) p.tp = *o.tp;
  if (o.pp) p.pp = *o.pp;
  if (o.vp) p.vp = *o.vp;
  apply_layer_split(o.layer_split, p);
  if (o.cp) p.cp = *o.cp;
  if (o.ep) p.ep = *o.ep;
  if (o.sp && o.no_sp) {
    throw InvalidConfig("--sp and --no-sp: expected one of them, got both");
  }
  if (o.sp) p.sequence_parallel = true;
  if (o.no_sp) p.sequence_parallel = false;
  if (o.microbatch_size) p.microbatch_size = *o.microbatch_size;
  if (o.seq) p.seq_len = *o.seq;
  if (o.recompute) p.recompute = *models::parse_recompute(*o.recompute);
  if (o.attention) p.attention = *models::parse_attention_kernel(*o.attention);
  if (o.fp8) p.fp8 = *models::parse_fp8_recipe(*o.fp8);
  if (o.tp_comm_overlap && o.no_tp_comm_overlap) {
    throw InvalidConfig(
        "--tp-comm-overlap and --no-tp-comm-overlap: expected one of them, got both");
  }
  if (o.tp_comm_overlap) p.tp_comm_overlap = true;
  if (o.no_tp_comm_overlap) p.tp_comm_overlap = false;
  if (o.scatter_gather_p2p && o.no_scatter_gather_p2p) {
    throw InvalidConfig(
        "--scatter-gather-p2p and --no-scatter-gather-p2p: expected one of them, got both");
  }
  if (o.scatter_gather_p2p) p.scatter_gather_p2p = true;
  if (o.no_scatter_gather_p2p) p.scatter_gather_p2p = false;
  // Each sets the batch and drops the other (the other follows from microbatch size and dp), so
  // giving both would silently let one win.
  if (o.global_batch && o.microbatches) {
    throw InvalidConfig(
        "--global-batch and -m/--microbatches: expected one of them, got both (the other "
        "follows from the microbatch size and dp)");
  }
  if (o.global_batch) {
    p.global_batch = *o.global_batch;
    p.num_microbatches.reset();
  }
  if (o.microbatches) {
    p.num_microbatches = *o.microbatches;
    p.global_batch.reset();
  }
  if (o.gpus) s.gpus = *o.gpus;
  if (o.dp) {
    p.dp = *o.dp;
    if (!o.gpus) s.gpus.reset();  // follows tp·pp·dp·cp
  } else if (s.gpus && p.tp * p.pp * p.cp > 0 && *s.gpus % (p.tp * p.pp * p.cp) == 0) {
    // The data-parallel size fills the GPUs left by the model-parallel sizes, as in Megatron.
    p.dp = *s.gpus / (p.tp * p.pp * p.cp);
  }
  if (o.schedule) {
    s.schedule.name = *o.schedule;
    s.schedule.p2p.reset();  // the new schedule's default unless --p2p says
    // A schedule with a fixed chunk count takes it unless --vp says otherwise.
    const std::int32_t fixed_vp = pipeline::find_schedule(*o.schedule).fixed_vp;
    if (!o.vp && fixed_vp != 0) p.vp = fixed_vp;
  }
  if (o.group_size) s.schedule.group_size = *o.group_size;
  if (o.memory_limit) s.schedule.memory_limit = *o.memory_limit;
  if (o.p2p) {
    s.schedule.p2p = *o.p2p == "batched" ? lowering::P2PMode::kBatched : lowering::P2PMode::kAsync;
  }
  // The built-in scenarios differ by command (simulate's policy is megatron-distopt with both
  // overlaps, run's megatron-ddp): --sync X on them means X's defaults everywhere.
  s.sync = apply_sync_flags(o.sync, s.sync, /*same_policy_keeps_knobs=*/!o.scenario_file.empty());
  if (o.profile) s.profile = load_profile(*o.profile);
  return s;
}

}  // namespace metron::cli
