#include "model_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "metron/base/error.h"
#include "metron/exec/gpt_of_model.h"
#include "metron/exec/model_rank.h"
#include "metron/exec/training_check.h"
#include "metron/models/hardware_presets.h"
#include "metron/sync/bucket_plan.h"

namespace metron::cli {

scenario::Scenario default_model_run_scenario() {
  scenario::Scenario s = scenario::default_scenario();
  s.model = models::ModelSpec{.name = "gpt-tiny",
                              .layers = 4,
                              .hidden = 64,
                              .heads = 4,
                              .vocab = 256,
                              .seq_len = 32,
                              .dtype = models::Precision::kFp32,
                              .make_vocab_size_divisible_by = 1};
  s.hardware = models::hardware_preset("cpu-local");
  s.gpus.reset();
  s.parallel = {.tp = 1, .pp = 2, .dp = 1, .microbatch_size = 2, .seq_len = 32};
  s.parallel.num_microbatches = 4;
  s.schedule = {.name = "1f1b"};
  s.sync = {.policy = sync::SyncPolicy::kMegatronDdp};
  return s;
}

bool train_in_fp32(scenario::Scenario& scenario) {
  if (!scenario.model) {
    throw InvalidConfig(
        "--payload model: the scenario names no model (explicit costs only); expected --model");
  }
  const bool changed = scenario.model->dtype != models::Precision::kFp32;
  scenario.model->dtype = models::Precision::kFp32;
  return changed;
}

exec::ModelPayload model_payload_of(const scenario::Scenario& scenario, const scenario::Step& step,
                                    std::int64_t steps, std::uint64_t seed) {
  const ir::Graph& graph = step.graph;
  // The pipeline rank of each model stage, from the graph's first replica: the schedule's
  // placement (looped, or V), which uneven first and last stages are counted by.
  std::map<std::int32_t, std::int32_t> placed;
  for (std::int32_t t = 0; t < graph.num_tasks(); ++t) {
    const ir::Task& task = graph.task(ir::TaskId{t});
    if (task.kind() == ir::TaskKind::kCompute && task.stage.valid() &&
        task.rank.value() < step.pipeline_ranks) {
      placed[task.stage.value()] = task.rank.value();
    }
  }
  std::vector<std::int32_t> stage_ranks;
  for (const auto& [stage, rank] : placed) {
    if (stage != std::ssize(stage_ranks)) break;
    stage_ranks.push_back(rank);
  }
  const models::ModelSpec& model = *scenario.model;
  const models::ParallelSpec parallel = scenario::model_split(scenario);
  // DualPipe runs each model stage twice, as stages pp..2pp-1 of its second direction (Note
  // [stage copies] in sync/stage_copies.h): the slices are the model's pp stages.
  if (step.sync_input.stage_copies && std::ssize(stage_ranks) >= parallel.pp) {
    stage_ranks.resize(static_cast<std::size_t>(parallel.pp));
  }
  if (std::ssize(stage_ranks) != parallel.pp * parallel.vp) stage_ranks.clear();
  exec::ModelPayload payload{.setup = {.model = exec::gpt_config_of(model, scenario.parallel, seed),
                                       .steps = steps,
                                       .microbatches = exec::replica_microbatches(graph) *
                                                       (graph.num_ranks() / step.pipeline_ranks)},
                             .slices = exec::stage_slices(model, parallel, stage_ranks),
                             .pipeline_ranks = step.pipeline_ranks,
                             .sync = {.input = step.sync_input, .buckets = {}}};
  if (!step.sync_input.params.empty()) {
    const sync::SyncPolicy policy = scenario.sync.policy;
    const bool fsdp = policy == sync::SyncPolicy::kFsdp1 || policy == sync::SyncPolicy::kFsdp2;
    if (fsdp &&
        sync::fsdp_shard_size(step.sync_input, scenario.sync) != step.sync_input.data_parallel) {
      throw InvalidConfig(
          "--payload model: HSDP (a shard group smaller than dp, whose shards are all-reduced "
          "over the replicate group) is not run by the model payload yet; expected the whole "
          "data-parallel group as FSDP's shard group");
    }
    // Note [embedding gradients]: the copies' reduced gradients are summed element by element,
    // so the two copies must be sharded alike. fairscale's OSS assigns owners in registration
    // order and FSDP1 shards each unit's flat parameter, so the word embeddings on the first
    // stage and their copy on the last fall to different ranks' shards; FSDP2 shards each
    // parameter on its own (alike), but the payload lays FSDP2's units out flat as FSDP1's.
    const bool sharded_apart = policy == sync::SyncPolicy::kFairscaleSdp || fsdp;
    if (model.tied_embeddings && parallel.pp > 1 && step.sync_input.data_parallel > 1 &&
        sharded_apart) {
      throw InvalidConfig(
          "--payload model: tied embeddings over " + std::to_string(parallel.pp) +
          " pipeline ranks under " + std::string(sync::to_string(policy)) +
          ": its shards of the word embeddings and of their copy on the last stage hold "
          "different elements, so the copies' gradients cannot be summed after the sync; "
          "expected ddp, megatron-ddp, megatron-distopt or zero1-3, or untied embeddings");
    }
    payload.sync.buckets = step.sync_plan;
  }
  exec::check_model_payload(graph, payload.pipeline_ranks, payload.setup, payload.slices,
                            payload.sync);
  return payload;
}

namespace {

/// The mean of each step's microbatch losses.
std::vector<double> mean_losses(const std::vector<std::vector<float>>& losses) {
  std::vector<double> out;
  for (const std::vector<float>& step : losses) {
    double sum = 0;
    for (const float loss : step) sum += loss;
    out.push_back(step.empty() ? 0.0 : sum / static_cast<double>(step.size()));
  }
  return out;
}

}  // namespace

TrainingReport training_report(const exec::ModelPayload& payload,
                               const std::vector<exec::RankRecord>& records, bool check) {
  const exec::TrainingSetup& setup = payload.setup;
  const auto replicas = static_cast<std::int32_t>(std::ssize(records) / payload.pipeline_ranks);
  const exec::TrainingRecord run = exec::replica_record(records, 0);
  const std::vector<double> run_mean = mean_losses(run.losses);
  TrainingReport report;
  report.json = {{"steps", setup.steps},
                 {"microbatches_per_step", setup.microbatches},
                 {"learning_rate", setup.adam.lr},
                 {"mean_loss", run_mean},
                 {"losses", run.losses}};
  std::vector<double> reference_mean;
  double loss_ratio = 0;  // the largest differences over the replicas, of their tolerances
  double parameter_ratio = 0;
  std::string parameter;
  if (check) {
    const exec::TrainingRecord reference = exec::reference_training(setup);
    reference_mean = mean_losses(reference.losses);
    nlohmann::ordered_json by_replica = nlohmann::ordered_json::array();
    for (std::int32_t d = 0; d < replicas; ++d) {
      const exec::CheckReport r =
          exec::check_training(exec::replica_record(records, d), reference, setup);
      by_replica.push_back({{"replica", d},
                            {"ok", r.ok},
                            {"worst_loss_over_tolerance", r.worst_loss},
                            {"worst_parameter_over_tolerance", r.worst_parameter},
                            {"worst_parameter", r.worst_parameter_name},
                            {"problems", r.problems}});
      loss_ratio = std::max(loss_ratio, r.worst_loss);
      if (r.worst_parameter >= parameter_ratio) {
        parameter_ratio = r.worst_parameter;
        parameter = r.worst_parameter_name;
      }
      if (!r.ok && report.ok) {
        report.ok = false;
        report.failure =
            "replica " + std::to_string(d) + ": " +
            (r.problems.empty() ? std::string("differs") : r.problems.front()) +
            (r.problems.size() > 1 ? fmt::format(" (and {} more)", r.problems.size() - 1)
                                   : std::string());
      }
    }
    report.json["check"] = {
        {"ok", report.ok}, {"reference_mean_loss", reference_mean}, {"replicas", by_replica}};
  }

  std::string& text = report.text;
  text += fmt::format(
      "\ntraining (model payload: {} layers, hidden {}, vocabulary {}, {} stages; fp32, AdamW "
      "lr {:g})\n",
      setup.model.layers, setup.model.hidden, setup.model.vocab, payload.slices.size(),
      setup.adam.lr);
  text += check ? "  step   mean loss    reference\n" : "  step   mean loss\n";
  for (std::size_t t = 0; t < run_mean.size(); ++t) {
    text += fmt::format("  {:>4}   {:<11.7f}", t + 1, run_mean[t]);
    if (check) text += fmt::format("  {:.7f}", reference_mean[t]);
    text += "\n";
  }
  if (check) {
    text += fmt::format(
        "  check against the single-process reference ({} replica{}): {}\n"
        "    largest loss difference       {:.3g} of the tolerance (1e-5 relative)\n"
        "    largest parameter difference  {:.3g} of the tolerance (1e-6 relative + 1e-2·lr a "
        "step; {})\n",
        replicas, replicas == 1 ? "" : "s", report.ok ? "passed" : "FAILED", loss_ratio,
        parameter_ratio, parameter.empty() ? "-" : parameter);
    if (!report.ok) text += "    " + report.failure + "\n";
  }
  return report;
}

}  // namespace metron::cli
