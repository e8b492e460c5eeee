#include "plan_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "integer_flags.h"
#include "list_flags.h"
#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/models/limits.h"
#include "metron/plan/configuration_text.h"
#include "metron/plan/plan_report.h"
#include "metron/plan/planner.h"
#include "metron/scenario/evaluation.h"
#include "metron/scenario/world_layout.h"
#include "metron/sim/trace_export.h"
#include "output_files.h"
#include "progress_bar.h"
#include "spec_loading.h"
#include "trace_metadata.h"

namespace metron::cli {
namespace {

/// Flags override default_plan_request() field by field; list flags are parsed (and checked,
/// naming the flag) only after CLI11 has read them all.
struct PlanFlags {
  std::optional<std::string> model, hardware;
  std::optional<std::int64_t> gpus, global_batch, seq;
  std::optional<std::string> tp, pp, dp, vp, cp, ep, microbatch_size, sp, recompute, attention, fp8,
      tp_comm_overlap, schedules, group_size_multiples, sync, bucket_sizes;
  std::optional<std::int64_t> max_tp, max_pp, max_vp, max_microbatch_size;
  std::optional<double> memory_headroom;
  std::int32_t top = 10;
  std::int32_t threads = 0;
  bool exhaustive = false;
  bool explain = false;
  std::optional<std::string> compare_with;
  bool quiet = false;
  std::string csv, json;
  std::int32_t trace_top = 0;
  std::int32_t save_scenario_top = 0;
  std::string trace_dir = ".";
};

/// Sets `field` from the list flag `name` when it was given.
template <class T, class Parse>
void set_list(std::vector<T>& field, const std::optional<std::string>& text, const char* name,
              Parse parse) {
  if (text) field = parse(name, *text);
}

plan::PlanSpace space_of(const PlanFlags& f) {
  plan::PlanSpace s;
  set_list(s.tp, f.tp, "--tp", parse_size_list);
  set_list(s.pp, f.pp, "--pp", parse_size_list);
  set_list(s.dp, f.dp, "--dp", parse_size_list);
  set_list(s.vp, f.vp, "--vp", parse_size_list);
  set_list(s.cp, f.cp, "--cp", parse_size_list);
  set_list(s.ep, f.ep, "--ep", parse_size_list);
  set_list(s.microbatch_size, f.microbatch_size, "--microbatch-size", parse_size_list);
  set_list(s.sequence_parallel, f.sp, "--sp", parse_on_off_both);
  set_list(s.recompute, f.recompute, "--recompute", parse_recompute_list);
  set_list(s.attention, f.attention, "--attention", parse_attention_list);
  set_list(s.fp8, f.fp8, "--fp8", parse_fp8_list);
  set_list(s.tp_comm_overlap, f.tp_comm_overlap, "--tp-comm-overlap", parse_on_off_both);
  set_list(s.schedules, f.schedules, "--schedules", parse_schedule_list);
  set_list(s.group_size_multiples, f.group_size_multiples, "--group-size-multiples",
           parse_small_size_list);
  set_list(s.policies, f.sync, "--sync", parse_policy_list);
  set_list(s.bucket_sizes, f.bucket_sizes, "--bucket-sizes", parse_size_list);
  if (f.max_tp) s.max_tp = *f.max_tp;
  if (f.max_pp) s.max_pp = *f.max_pp;
  if (f.max_vp) s.max_vp = *f.max_vp;
  if (f.max_microbatch_size) s.max_microbatch_size = *f.max_microbatch_size;
  return s;
}

plan::PlanRequest request_of(const PlanFlags& f) {
  plan::PlanRequest r = plan::default_plan_request();
  if (f.model) {
    r.model = load_model(*f.model);
    r.seq_len = 0;  // another model trains at its own sequence length unless --seq says
  }
  if (f.hardware) r.hardware = load_hardware(*f.hardware);
  if (f.gpus) r.gpus = *f.gpus;
  if (f.global_batch) r.global_batch = *f.global_batch;
  if (f.seq) r.seq_len = *f.seq;
  if (f.memory_headroom) r.memory_headroom = *f.memory_headroom;
  r.top_k = f.top;
  r.space = space_of(f);
  plan::validate(r);
  return r;
}

/// `name` in the --trace-dir folder.
std::string output_path(const PlanFlags& f, const std::string& name) {
  return (std::filesystem::path(f.trace_dir) / name).string();
}

/// The --trace-top and --save-scenario-top files the flags ask for, at most `k` of each.
std::vector<NamedOutput> ranked_outputs(const PlanFlags& f, std::size_t traces,
                                        std::size_t scenarios) {
  std::vector<NamedOutput> out;
  for (std::size_t i = 0; i < traces; ++i) {
    out.push_back({"--trace-top", output_path(f, fmt::format("plan-trace-{}.json", i + 1)),
                   OutputKind::kFileInFolder});
  }
  for (std::size_t i = 0; i < scenarios; ++i) {
    out.push_back({"--save-scenario-top",
                   output_path(f, fmt::format("plan-scenario-{}.json", i + 1)),
                   OutputKind::kFileInFolder});
  }
  return out;
}

/// Every output the flags ask for, named by flag, for check_outputs.
std::vector<NamedOutput> all_outputs(const PlanFlags& f) {
  std::vector<NamedOutput> out = {{"--csv", f.csv}, {"--json", f.json}};
  if (f.trace_top + f.save_scenario_top > 0) {
    out.push_back({"--trace-dir", f.trace_dir, OutputKind::kFolder});
  }
  for (NamedOutput& o : ranked_outputs(f, static_cast<std::size_t>(f.trace_top),
                                       static_cast<std::size_t>(f.save_scenario_top))) {
    out.push_back(std::move(o));
  }
  return out;
}

void run(const PlanFlags& f) {
  const plan::PlanRequest request = request_of(f);
  // Read before the search: a typo found after minutes of searching would waste them.
  std::optional<plan::Candidate> compared_candidate;
  if (f.compare_with) compared_candidate = plan::parse_configuration(request, *f.compare_with);
  // Checked before the search: a clash found after minutes of work would lose them.
  check_outputs(all_outputs(f));
  ProgressBar bar(std::cerr, !f.quiet && ProgressBar::stderr_is_terminal());
  plan::PlanOptions options{.threads = f.threads, .exhaustive = f.exhaustive};
  options.progress = [&bar](const plan::PlanProgress& p) { bar.update(p.phase, p.done, p.total); };
  const plan::PlanResult result = plan::run_plan(request, options);
  bar.clear();
  std::optional<plan::ComparedConfig> compared;
  if (compared_candidate) {
    compared = plan::compare_configuration(request, result, *compared_candidate);
  }
  // Everything is computed before anything is written, and written all or nothing: a failure
  // leaves no partial outputs.
  std::vector<OutputFile> files;
  if (!f.csv.empty()) files.push_back({f.csv, plan::plan_csv(result)});
  if (!f.json.empty()) {
    files.push_back({f.json, plan::plan_json(request, result, compared ? &*compared : nullptr)});
  }
  const std::size_t traces = std::min(static_cast<std::size_t>(f.trace_top), result.ranked.size());
  const std::size_t scenarios =
      std::min(static_cast<std::size_t>(f.save_scenario_top), result.ranked.size());
  const std::vector<NamedOutput> ranked = ranked_outputs(f, traces, scenarios);
  std::vector<TraceOutput> trace_files;
  for (std::size_t i = 0; i < traces; ++i) {
    // The k best simulated again for their traces (the simulator's layout, as `simulate`).
    const scenario::Evaluation e = scenario::evaluate(result.ranked[i].scenario);
    trace_files.push_back(
        {ranked[i].path, sim::simulation_trace(e.step.graph, e.result, trace_metadata(e.scenario),
                                               scenario::trace_options(e.scenario, e.step))});
  }
  for (std::size_t i = 0; i < scenarios; ++i) {
    files.push_back({ranked[traces + i].path, scenario::to_json(result.ranked[i].scenario)});
  }
  if (!f.quiet) {
    std::cout << plan::ranked_table(request, result);
    if (compared) std::cout << "\n" << plan::comparison_text(result, *compared);
    if (f.explain) std::cout << "\n" << plan::explain_text(result);
    std::cout << plan::stats_line(result);
    if (f.explain) std::cout << plan::phases_line(result);
  }
  if (traces + scenarios > 0) create_output_directory("--trace-dir", f.trace_dir);
  const std::vector<std::string> written = write_outputs(std::move(files), trace_files);
  if (f.quiet) return;
  for (std::size_t i = 0; i < written.size(); ++i) {
    std::cout << fmt::format("  {:<9} #{:<3} {}\n", "trace", i + 1, written[i]);
  }
  for (std::size_t i = 0; i < scenarios; ++i) {
    std::cout << fmt::format("  {:<9} #{:<3} {}\n", "scenario", i + 1, ranked[traces + i].path);
  }
}

/// CLI11 checks with messages that say what is expected (CLI11's own print the range's limits).
CLI::Validator fraction_below_one() {
  return CLI::Validator(
      [](const std::string& text) {
        char* end = nullptr;
        const double x = std::strtod(text.c_str(), &end);
        const bool ok = end != text.c_str() && *end == '\0' && x >= 0 && x < 1;
        return ok ? std::string() : "expected a fraction in [0, 1), got " + text;
      },
      "");
}

CLI::Validator integer_at_least(std::int64_t least) {
  return CLI::Validator(
      [least](const std::string& text) {
        std::int64_t n = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), n);
        const bool ok = error == std::errc() && end == text.data() + text.size() && n >= least;
        return ok ? std::string()
                  : "expected an integer >= " + std::to_string(least) + ", got " + text;
      },
      "");
}

constexpr const char* kDescription =
    "Search the parallel configurations of a model on a GPU budget and rank those that fit by\n"
    "simulated tokens/s (every configuration trains the same global batch, so this is also\n"
    "the order of iteration time). Without flags it plans GPT-3 175B on 1,024 H100 GPUs in\n"
    "DGX H100 nodes, global batch 1,536, sequence 2,048.\n"
    "\n"
    "The space: each dimension takes the values its flag lists (comma-separated, e.g. --tp 4,8;\n"
    "one value fixes it), else its default range:\n"
    "  tp 1..--max-tp (GPUs per node) where the heads and ffn divide; cp 1; pp 1..--max-pp\n"
    "  (the layers), split evenly where the layers divide, else (one-chunk and interleaved\n"
    "  schedules) with the first and last ranks lighter, as Megatron's\n"
    "  --decoder-first/last-pipeline-num-layers ('first7 last7'); vp 1 for one-chunk\n"
    "  schedules, 2 for V schedules and\n"
    "  DualPipe-V, 2..--max-vp (8) for interleaved 1F1B; dp every divisor of the global batch\n"
    "  with tp·pp·dp·cp <= --gpus; ep 1 (MoE: divisors of the experts dividing dp·cp);\n"
    "  microbatch size every divisor of global batch / dp up to --max-microbatch-size (16);\n"
    "  sequence parallelism on whenever tp > 1 and tp·cp divides the sequence; recompute none,\n"
    "  selective, full; attention unfused, fp8 off and tp comm overlap off (each as 'simulate'\n"
    "  assumes: fused kernels, FP8 and userbuffers need software and a numerics choice, so they\n"
    "  are searched only where listed; the overlap only at tp > 1 with sequence parallelism);\n"
    "  schedules 1f1b, interleaved-1f1b (at pp 1 only 1f1b, which the others equal there);\n"
    "  group size 1·pp; sync megatron-distopt, each policy with the overlap its system\n"
    "  recommends; bucket size the policy's default.\n"
    "\n"
    "How: rules first (divisibility, schedule limits) drop whole families; the memory model\n"
    "drops what does not fit in (1 - --memory-headroom) of the GPU; a lower bound on the\n"
    "iteration time orders the rest, and configurations are simulated in that order until the\n"
    "bound exceeds the --top'th best time (the ranking equals an exhaustive search's).\n"
    "\n"
    "Prints the ranking (tokens/s, iteration time, MFU, bubble, exposed communication, peak\n"
    "memory per GPU against its capacity, GPUs, configuration) and a line of statistics;\n"
    "--explain lists what was dropped and why; --compare-with \"tp8 pp16 dp128 ...\" places a\n"
    "configuration you name against the ranking and says what beats it. --csv and --json are\n"
    "written atomically, and nothing is written when the plan fails.";

/// A comma-separated list flag (parsed by list_flags.h once every flag is read).
void add_list(CLI::Option_group& g, const std::string& name, std::optional<std::string>& text,
              const std::string& help) {
  g.add_option(name, text, help)->type_name("LIST");
}

void add_space_flags(CLI::App& cmd, PlanFlags& f) {
  CLI::Option_group& g = *cmd.add_option_group(
      "Search space", "comma-separated lists; a flag left out takes the default range");
  add_list(g, "--tp", f.tp, "tensor-parallel sizes");
  add_list(g, "--pp", f.pp, "pipeline-parallel sizes");
  add_list(g, "--dp", f.dp, "data-parallel sizes");
  add_list(g, "--vp", f.vp, "model chunks per pipeline rank");
  add_list(g, "--cp", f.cp, "context-parallel sizes (default 1)");
  add_list(g, "--ep", f.ep, "expert-parallel sizes (MoE)");
  add_list(g, "--microbatch-size", f.microbatch_size, "samples per microbatch");
  g.add_option("--sp", f.sp, "sequence parallelism at tp > 1: on (default), off or both")
      ->type_name("on|off|both");
  add_list(g, "--recompute", f.recompute, "none, selective, full (default: all three)");
  add_list(g, "--attention", f.attention,
           "attention kernels: unfused, fused (flash-style; default: unfused)");
  add_list(g, "--fp8", f.fp8,
           "FP8 recipes for the layers' GEMMs: off, delayed, current (default: off; needs a GPU "
           "with an fp8 peak)");
  g.add_option("--tp-comm-overlap", f.tp_comm_overlap,
               "Transformer Engine's tensor-parallel communication overlap at tp > 1 with "
               "sequence parallelism: off (default), on or both")
      ->type_name("on|off|both");
  add_list(g, "--schedules", f.schedules,
           "pipeline schedules (see 'metron schedule --help'), or all = " +
               std::string(plan::kAllPlanSchedules) + " (default: 1f1b,interleaved-1f1b)");
  add_list(g, "--group-size-multiples", f.group_size_multiples,
           "interleaved 1F1B's group size N as multiples of pp (default 1)");
  add_list(g, "--sync", f.sync,
           "data-parallel sync policies: " + std::string(sync::sync_policy_names()) +
               ", or all (default: megatron-distopt)");
  add_list(g, "--bucket-sizes", f.bucket_sizes,
           "gradient bucket sizes, in each policy's unit (default: the policy's)");
  g.add_option("--max-tp", f.max_tp, "largest default tp (default: GPUs per node)")
      ->check(integer_at_least(0));
  g.add_option("--max-pp", f.max_pp, "largest default pp (default: the layers)")
      ->check(integer_at_least(0));
  g.add_option("--max-vp", f.max_vp, "largest interleaved vp (default 8)")
      ->check(integer_at_least(1));
  g.add_option("--max-microbatch-size", f.max_microbatch_size,
               "largest default microbatch size (default 16)")
      ->check(integer_at_least(1));
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto f = std::make_shared<PlanFlags>();
  CLI::App* cmd = app.add_subcommand("plan", kDescription);
  cmd->add_option("--model", f->model,
                  "model preset or JSON file (default gpt3-175b; another model trains at its own "
                  "sequence length unless --seq says)")
      ->type_name("NAME|FILE");
  cmd->add_option("--hardware", f->hardware, "hardware preset or JSON file (default dgx-h100)")
      ->type_name("NAME|FILE");
  cmd->add_option("--gpus", f->gpus, "GPUs available; a configuration may use fewer (1024)")
      ->check(integer_at_least(1));
  cmd->add_option("--global-batch", f->global_batch, "samples per iteration (1536)")
      ->check(integer_at_least(1));
  cmd->add_option("--seq", f->seq, "sequence length (2048)")->check(integer_at_least(1));
  add_space_flags(*cmd, *f);
  cmd->add_option("--memory-headroom", f->memory_headroom,
                  "fraction of each GPU's memory kept free (0.1)")
      ->check(fraction_below_one());
  cmd->add_option("--top", f->top, "configurations to rank")
      ->capture_default_str()
      ->check(integer_in(1, std::numeric_limits<std::int32_t>::max()));
  cmd->add_option("--threads", f->threads, "threads (0 = every core)")
      ->capture_default_str()
      ->check(integer_in(0, models::kMaxThreads));
  cmd->add_flag("--exhaustive", f->exhaustive,
                "simulate every configuration that fits (no pruning by the bound; slow)");
  cmd->add_flag("--explain", f->explain, "list the dropped families and why");
  cmd->add_option("--compare-with", f->compare_with,
                  "a configuration to place against the ranking, e.g. \"tp8 pp16 dp128 mbs1\n"
                  "1f1b\" (tpN ppN dpN cpN epN vpN mbsN firstN lastN sp|nosp recompute=MODE N=K\n"
                  "bucket=B attention=KERNEL fp8=RECIPE tpoverlap|notpoverlap, a schedule, a sync\n"
                  "policy; the rest as the planner would choose):\n"
                  "its predicted time and memory, its rank, and what beats it")
      ->type_name("CONFIG");
  cmd->add_option("--csv", f->csv, "write the ranking as CSV here")->type_name("FILE");
  cmd->add_option("--json", f->json,
                  "write the request, ranking (with each scenario), drops and statistics here")
      ->type_name("FILE");
  cmd->add_option("--trace-top", f->trace_top,
                  "simulate the K best again and write their traces, plan-trace-<rank>.json")
      ->check(integer_in(0, models::kMaxRanked));
  cmd->add_option("--save-scenario-top", f->save_scenario_top,
                  "write the K best scenarios, plan-scenario-<rank>.json (for 'metron simulate')")
      ->check(integer_in(0, models::kMaxRanked));
  cmd->add_option("--trace-dir", f->trace_dir,
                  "folder for --trace-top and --save-scenario-top files (created if missing)")
      ->type_name("DIR")
      ->capture_default_str();
  cmd->add_flag("-q,--quiet", f->quiet, "print nothing; only write the files asked for");
  check_integer_options(*cmd);
  cmd->callback([f] { run(*f); });
}

}  // namespace metron::cli
