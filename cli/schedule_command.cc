#include "schedule_command.h"

#include <fmt/format.h>

#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collective_listing.h"
#include "integer_flags.h"
#include "list_flags.h"
#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/ir/action_rows.h"
#include "metron/ir/json_format.h"
#include "metron/lowering/lowering.h"
#include "metron/models/limits.h"
#include "metron/pipeline/order_checks.h"
#include "metron/pipeline/registry.h"
#include "metron/pipeline/user_order.h"
#include "metron/scenario/scenario.h"
#include "metron/scenario/step_builder.h"
#include "scenario_costs.h"
#include "schedule_grid.h"
#include "spec_loading.h"
#include "sync_flags.h"

namespace metron::cli {
namespace {

constexpr std::int64_t kMaxInt32 = std::numeric_limits<std::int32_t>::max();

struct ScheduleOptions {
  pipeline::ScheduleSpec spec;
  std::optional<std::int32_t> vp;
  std::optional<std::int32_t> layers;
  std::optional<std::string> layers_per_stage;
  std::optional<std::int32_t> first_stage_layers;
  std::optional<std::int32_t> last_stage_layers;
  std::optional<std::int32_t> encoder_decoder_split;
  std::string order_file;
  std::string scenario_file;
  bool with_comms = false;
  std::string p2p = "async";
  std::string format = "text";
  std::string output = "-";
  // --sync: the step with its data-parallel collectives, sized from a model.
  SyncFlags sync;
  std::optional<std::string> model;
  std::string hardware = "dgx-h100";
  std::int64_t tp = 1;
  std::int64_t dp = 2;
  bool sp = false;
};

std::int32_t num_stages(const pipeline::ScheduleInfo& info, const pipeline::ScheduleSpec& spec) {
  return info.placement == pipeline::Placement::kLoop ? spec.pp * spec.vp : 2 * spec.pp;
}

lowering::LoweringOptions lowering_options(const ScheduleOptions& o) {
  lowering::LoweringOptions out;
  out.p2p = !o.with_comms        ? lowering::P2PMode::kNone
            : o.p2p == "batched" ? lowering::P2PMode::kBatched
                                 : lowering::P2PMode::kAsync;
  out.encoder_decoder_split = o.encoder_decoder_split;
  out.layers = {.layers = o.layers,
                .per_stage = o.layers_per_stage
                                 ? parse_int32_list("--layers-per-stage", *o.layers_per_stage)
                                 : std::vector<std::int32_t>{},
                .first_stage = o.first_stage_layers,
                .last_stage = o.last_stage_layers};
  return out;
}

std::string render(const ScheduleOptions& o, const pipeline::Order& order,
                   const lowering::LoweringOptions& lowering) {
  if (o.format == "grid") return render_grid(order);
  if (o.format == "json") return ir::to_json(lowering::lower(order, lowering));
  pipeline::Order rows = order;
  if (lowering.p2p == lowering::P2PMode::kAsync) rows = lowering::add_p2p_async(order);
  if (lowering.p2p == lowering::P2PMode::kBatched) rows = lowering::add_p2p_batched(order);
  return o.format == "csv" ? ir::format_csv(rows) : ir::format_rows(rows);
}

/// A user's order file: the text form, or PyTorch's CSV when the name ends in .csv.
pipeline::UserOrder read_user_order(const std::string& path) {
  const std::string text = read_file(path);
  const bool csv = path.size() >= 4 && path.compare(path.size() - 4, 4, ".csv") == 0;
  return pipeline::user_order(csv ? ir::parse_csv(text, path) : ir::parse_rows(text, path));
}

/// Note [input limits]: the forwards of the order, microbatches·pp·vp, below their limit before
/// the generator allocates them (each factor is already below its own limit, so none overflows).
void check_order_size(const pipeline::ScheduleSpec& spec) {
  const std::int64_t forwards = std::int64_t{spec.microbatches} * spec.pp * spec.vp;
  if (forwards > models::kMaxPipelineActions) {
    throw InvalidConfig(fmt::format(
        "schedule: microbatches·pp·vp ({}·{}·{} = {}): expected at most {} (the limit of "
        "forwards per pipeline and iteration)",
        spec.microbatches, spec.pp, spec.vp, forwards, models::kMaxPipelineActions));
  }
}

/// The order asked for, checked; `stages` is set to its number of global stages.
pipeline::Order make_order(ScheduleOptions& o, std::int32_t& stages) {
  if (!o.order_file.empty()) {
    pipeline::UserOrder user = read_user_order(o.order_file);
    stages = user.placement == pipeline::Placement::kLoop ? user.spec.pp * user.spec.vp
                                                          : 2 * user.spec.pp;
    return std::move(user.order);
  }
  if (o.spec.pp < 1 || o.spec.microbatches < 1) {
    throw InvalidConfig("schedule: --pp and --microbatches are required (or --order FILE)");
  }
  const pipeline::ScheduleInfo& info = pipeline::find_schedule(o.spec.name);
  o.spec.vp = o.vp.value_or(info.fixed_vp != 0 ? info.fixed_vp : 1);
  check_order_size(o.spec);
  if (!o.scenario_file.empty()) o.spec.times = read_scenario_costs(o.scenario_file);
  pipeline::Order order = pipeline::generate_order(o.spec);
  // A generator bug must never reach the user as a plausible-looking schedule.
  pipeline::validate_order(order, o.spec, info.placement);
  stages = num_stages(info, o.spec);
  return order;
}

/// --sync: the scenario the flags describe, built as `metron simulate` builds it (with the
/// tensor-parallel collectives too), listing what every rank issues.
void run_with_sync(const ScheduleOptions& o) {
  if (!o.order_file.empty()) {
    throw InvalidConfig(
        "schedule: --sync builds a generated schedule; expected --schedule, not "
        "--order");
  }
  if (!o.model) {
    throw InvalidConfig(
        "schedule: --sync needs --model (a preset or JSON file) to size the buckets");
  }
  if (o.format != "text" && o.format != "json") {
    throw InvalidConfig(
        "schedule: with --sync, expected --format text (the collectives) or json "
        "(the whole graph), got " +
        o.format);
  }
  if (o.spec.pp < 1 || o.spec.microbatches < 1) {
    throw InvalidConfig("schedule: --pp and --microbatches are required");
  }
  scenario::Scenario s;
  s.model = load_model(*o.model);
  s.hardware = load_hardware(o.hardware);
  const pipeline::ScheduleInfo& info = pipeline::find_schedule(o.spec.name);
  s.parallel = {.tp = o.tp,
                .pp = o.spec.pp,
                .dp = o.dp,
                .vp = o.vp.value_or(info.fixed_vp != 0 ? info.fixed_vp : 1),
                .sequence_parallel = o.sp,
                .num_microbatches = o.spec.microbatches,
                .seq_len = s.model->seq_len};
  s.schedule = {.name = o.spec.name,
                .group_size = o.spec.group_size,
                .p2p = o.p2p == "batched" ? lowering::P2PMode::kBatched : lowering::P2PMode::kAsync,
                .memory_limit = o.spec.memory_limit};
  s.sync = apply_sync_flags(o.sync, {}, /*same_policy_keeps_knobs=*/false);
  // The written graph says what each compute task computes, for `metron run graph.json`.
  const scenario::Step step =
      scenario::build_step(s, scenario::Replication::kSymmetric, scenario::Payload::kOperations);
  write_file_atomically(
      o.output, o.format == "json" ? ir::to_json(step.graph) : collective_listing(step.graph));
}

void run_schedule(ScheduleOptions o) {
  if (o.sync.policy) return run_with_sync(o);
  std::int32_t stages = 0;
  const pipeline::Order order = make_order(o, stages);
  if (o.encoder_decoder_split && o.format != "json") {
    throw InvalidConfig(
        "--encoder-decoder-split changes the lowered graph only; expected "
        "--format json (the text forms have no way to show the second tensor)");
  }
  const lowering::LoweringOptions lowering = lowering_options(o);
  if (lowering.layers.any()) (void)lowering::assign_layers(lowering.layers, stages);
  write_file_atomically(o.output, render(o, order, lowering));
}

std::string schedule_list() {
  std::string out = "\nSchedules:\n";
  for (const auto& s : pipeline::all_schedules()) {
    out += fmt::format("  {:<24}{}\n", s.name, s.description);
  }
  return out;
}

}  // namespace

void add_schedule_command(CLI::App& app) {
  auto o = std::make_shared<ScheduleOptions>();
  CLI::App* cmd = app.add_subcommand(
      "schedule",
      "Print a pipeline schedule: each rank's compute order in PyTorch's action syntax\n"
      "(<stage>F<mb>, <stage>I<mb>, <stage>W<mb>, <stage>B<mb>, (<a>;<b>)OVERLAP_F_B) with global\n"
      "stage indices, optionally with the p2p sends and receives, as text, PyTorch's CSV, a\n"
      "step-by-rank grid, or the lowered task graph as JSON. Impossible combinations are\n"
      "reported with the constraint that failed and what would be valid.");
  auto* schedule = cmd->add_option("--schedule", o->spec.name, "schedule name (see the list below)")
                       ->default_str("1f1b");
  o->spec.pp = 0;
  o->spec.microbatches = 0;
  cmd->add_option("--pp", o->spec.pp, "pipeline ranks p (required unless --order)")
      ->check(integer_in(1, models::kMaxGpus));
  cmd->add_option("--vp", o->vp, "chunks per rank v (default: 1, or 2 for V schedules)")
      ->check(integer_in(1, models::kMaxGpus));
  cmd->add_option("-m,--microbatches", o->spec.microbatches,
                  "microbatches per iteration m (required unless --order)")
      ->check(integer_in(1, models::kMaxMicrobatches));
  auto* order = cmd->add_option("--order", o->order_file,
                                "a schedule of your own instead of --schedule: the text form "
                                "(rank 0: 0F0 0F1 ...) or PyTorch's compute-only CSV (.csv)");
  cmd->add_option("--scenario", o->scenario_file,
                  "zb-auto: per-stage F/I/W and p2p times (ms) from the scenario's \"costs\" "
                  "(unit times without it)")
      ->excludes(order);
  order->excludes(schedule);
  cmd->add_option("--group-size", o->spec.group_size,
                  "interleaved 1F1B microbatch group size N (default p)")
      ->check(integer_in(1, kMaxInt32));
  cmd->add_option("--memory-limit", o->spec.memory_limit,
                  "zb-auto: max pending backwards K, in microbatch activations of one stage "
                  "(K = p: ZB-1p, K = 2p: ZB-2p; default p)")
      ->check(integer_in(1, kMaxInt32));
  auto* layers = cmd->add_option("--layers", o->layers, "transformer layers, split evenly")
                     ->check(integer_in(1, models::kMaxLayers));
  auto* per_stage = cmd->add_option("--layers-per-stage", o->layers_per_stage,
                                    "layers of each stage, e.g. 6,7,7,4")
                        ->type_name("LIST");
  cmd->add_option("--first-stage-layers", o->first_stage_layers,
                  "layers on the first stage (with --layers; the rest split evenly)")
      ->check(integer_in(0, models::kMaxLayers));
  cmd->add_option("--last-stage-layers", o->last_stage_layers,
                  "layers on the last stage (with --layers; the rest split evenly)")
      ->check(integer_in(0, models::kMaxLayers));
  layers->excludes(per_stage);
  cmd->add_flag("--forward-only", o->spec.forward_only, "inference: forwards only");
  cmd->add_option("--encoder-decoder-split", o->encoder_decoder_split,
                  "encoder-decoder model (T5): first decoder stage; boundaries after it carry a "
                  "second tensor (in the lowered graph, --format json)")
      ->check(integer_in(0, kMaxInt32));
  cmd->add_flag("--with-comms", o->with_comms, "add SEND_F/RECV_F/SEND_B/RECV_B");
  cmd->add_option("--p2p", o->p2p,
                  "with --with-comms: async (isend/irecv, overlap_p2p_comm) or batched (Megatron's "
                  "blocking exchanges)")
      ->check(CLI::IsMember({"async", "batched"}));
  add_sync_flags(*cmd, o->sync);
  CLI::Option_group& sized = *cmd->add_option_group(
      "With --sync", "the model and sizes that give the collectives their bytes");
  sized.add_option("--model", o->model, "model preset or JSON file");
  sized.add_option("--hardware", o->hardware, "hardware preset or JSON file (dgx-h100)");
  sized.add_option("--tp", o->tp, "tensor-parallel size (1)");
  sized.add_option("--dp", o->dp, "data-parallel size (2)");
  sized.add_flag("--sp", o->sp, "sequence parallelism");
  cmd->add_option("--format", o->format, "text, csv, grid or json (the lowered graph)")
      ->check(CLI::IsMember({"text", "csv", "grid", "json"}));
  cmd->add_option("-o,--output", o->output, "file to write (default: stdout), written atomically");
  cmd->footer(
      schedule_list() +
      "\nExamples:\n  metron schedule --schedule 1f1b --pp 4 --microbatches 8\n"
      "  metron schedule --schedule interleaved-1f1b --pp 4 --vp 2 -m 8 --format grid\n"
      "  metron schedule --schedule zb-v --pp 4 -m 8 --with-comms\n"
      "  metron schedule --schedule zb-auto --pp 4 -m 8 --memory-limit 8 --scenario s.json\n"
      "  metron schedule --order my-schedule.csv --with-comms --format json -o step.json\n"
      "  metron schedule --schedule 1f1b --pp 2 -m 4 --with-comms --sync megatron-distopt \\\n"
      "      --overlap-grad-reduce --overlap-param-gather --model llama2-7b --dp 8\n");
  check_integer_options(*cmd);
  cmd->callback([o] { run_schedule(*o); });
}

}  // namespace metron::cli
