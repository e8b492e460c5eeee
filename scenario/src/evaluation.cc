// Note [step metrics] (evaluation.h).

#include "metron/scenario/evaluation.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "metron/models/compute_cost.h"

namespace metron::scenario {
namespace {

using Json = nlohmann::ordered_json;

double ms(sim::Time t) { return static_cast<double>(t) / 1e6; }

sim::Time pipeline_bubble(const sim::RankMetrics& m) {
  sim::Time total = 0;
  for (const auto& [cause, time] : m.bubble) {
    if (cause != sim::BubbleCause::kWaitCollective) total += time;
  }
  return total;
}

std::string gib(double bytes) { return fmt::format("{:.1f}", bytes / (1024.0 * 1024 * 1024)); }

}  // namespace

Evaluation evaluate(const Scenario& scenario, Replication replication) {
  Step step = build_step(scenario, replication);
  sim::SimResult result = sim::simulate(step.graph, step.durations, step.sim_options());
  return evaluation_of(scenario, std::move(step), std::move(result));
}

Evaluation evaluation_of(const Scenario& scenario, Step step, sim::SimResult result) {
  Evaluation e;
  e.scenario = scenario;
  e.step = std::move(step);
  e.result = std::move(result);
  e.iteration_time_s = static_cast<double>(e.result.makespan) / 1e9;
  const models::ParallelSpec& p = scenario.parallel;
  const double ranks = static_cast<double>(e.result.ranks.size());
  for (const sim::RankMetrics& m : e.result.ranks) {
    if (e.result.makespan > 0) {
      e.bubble_fraction +=
          static_cast<double>(pipeline_bubble(m)) / static_cast<double>(e.result.makespan) / ranks;
      e.exposed_comm_fraction +=
          static_cast<double>(m.comm_exposed) / static_cast<double>(e.result.makespan) / ranks;
    }
  }
  for (std::size_t r = 0; r < e.result.ranks.size(); ++r) {
    const std::size_t pipeline_rank = r % static_cast<std::size_t>(e.step.pipeline_ranks);
    const double state = e.step.state_bytes.empty() ? 0.0 : e.step.state_bytes[pipeline_rank];
    e.peak_memory_bytes.push_back(state + static_cast<double>(e.result.ranks[r].peak_memory_bytes));
  }
  if (scenario.costs)
    e.stage_span_bubble_rate = sim::stage_span_bubble_rate(e.step.graph, e.result);
  if (scenario.model && e.iteration_time_s > 0) {
    const double samples = static_cast<double>(*p.microbatches() * p.microbatch_size * p.dp);
    const double gpus = static_cast<double>(scenario.gpus.value_or(p.gpus()));
    e.tokens_per_s =
        samples * static_cast<double>(p.sequence_length(*scenario.model)) / e.iteration_time_s;
    e.model_flops = models::iteration_flops(*scenario.model, p, /*with_recompute=*/false);
    e.model_tflops_per_gpu = e.model_flops / e.iteration_time_s / gpus / 1e12;
    const std::optional<double> peak = scenario.hardware.gpu.peak(scenario.model->dtype);
    if (peak) e.mfu = e.model_flops / (e.iteration_time_s * gpus * *peak);
  }
  return e;
}

std::string result_json(const Evaluation& e) {
  const ir::Graph& g = e.step.graph;
  Json per_rank = Json::array();
  for (std::size_t r = 0; r < e.result.ranks.size(); ++r) {
    const sim::RankMetrics& m = e.result.ranks[r];
    const ir::RankCoords& c = g.rank(ir::RankId{static_cast<std::int32_t>(r)}).coords;
    Json bubble = Json::object();
    for (const auto& [cause, time] : m.bubble)
      bubble[std::string(sim::to_string(cause))] = ms(time);
    const auto by_group = [&](const std::map<ir::GroupId, std::int64_t>& bytes) {
      Json out = Json::object();
      for (const auto& [group, sum] : bytes) {
        out[group.valid() ? g.group(group).name : std::string("p2p")] = sum;
      }
      return out;
    };
    Json timeline = Json::array();
    for (const auto& [time, bytes] : m.memory_timeline) timeline.push_back({ms(time), bytes});
    per_rank.push_back({{"rank", r},
                        {"tp", c.tp},
                        {"pp", c.pp},
                        {"dp", c.dp},
                        {"compute_ms", ms(m.compute_busy)},
                        {"idle_ms", ms(m.idle)},
                        {"bubble_ms", bubble},
                        {"comm_ms", ms(m.comm_total)},
                        {"comm_exposed_ms", ms(m.comm_exposed)},
                        {"comm_overlapped_ms", ms(m.comm_overlapped)},
                        {"bytes_sent", by_group(m.bytes_sent)},
                        {"collective_bytes", by_group(m.collective_bytes)},
                        {"peak_memory_bytes", e.peak_memory_bytes[r]},
                        {"activation_memory_timeline", timeline}});
  }
  Json critical = Json::array();
  for (ir::TaskId t : e.result.critical_path) {
    const sim::TaskTiming& timing = e.result.tasks[t.index()];
    critical.push_back({{"task", t.value()},
                        {"what", g.describe(t)},
                        {"start_ms", ms(timing.start)},
                        {"end_ms", ms(timing.end)}});
  }
  const double peak_max =
      e.peak_memory_bytes.empty()
          ? 0.0
          : *std::max_element(e.peak_memory_bytes.begin(), e.peak_memory_bytes.end());
  const Json out = {{"iteration_time_ms", e.iteration_time_s * 1e3},
                    {"tokens_per_s", e.tokens_per_s},
                    {"mfu", e.mfu},
                    {"model_tflops_per_gpu", e.model_tflops_per_gpu},
                    {"bubble_fraction", e.bubble_fraction},
                    {"exposed_comm_fraction", e.exposed_comm_fraction},
                    {"stage_span_bubble_rate",
                     e.stage_span_bubble_rate ? Json(*e.stage_span_bubble_rate) : Json(nullptr)},
                    {"peak_memory_bytes_max", peak_max},
                    {"hbm_capacity_bytes", e.scenario.hardware.gpu.hbm_capacity},
                    {"simulated_ranks", e.result.ranks.size()},
                    {"simulated_tasks", g.num_tasks()},
                    {"per_rank", per_rank},
                    {"critical_path", critical}};
  return out.dump(2) + "\n";
}

std::string summary_text(const Evaluation& e) {
  const Scenario& s = e.scenario;
  const models::ParallelSpec& p = s.parallel;
  std::string out = fmt::format(
      "{} on {} x {}: tp {} pp {} dp {} vp {} cp {}, microbatch {} x {} microbatches, {} "
      "({} p2p{}), {}\n",
      s.model ? s.model->name : std::string("explicit stage costs"), s.gpus.value_or(p.gpus()),
      s.hardware.name, p.tp, p.pp, p.dp, p.vp, p.cp, p.microbatch_size,
      p.microbatches().value_or(0), s.schedule.name,
      p2p_mode(s.schedule) == lowering::P2PMode::kBatched ? "batched" : "async",
      s.model && p.p2p_scatter_gather() ? ", scatter/gather" : "", sync::to_string(s.sync.policy));
  if (s.model && p.uneven_split()) {
    // Note [uneven stages]: say how the layers split, as runs of equal counts ("7, 8 x 14, 7").
    const std::vector<std::int64_t> layers = models::pipeline_rank_layers(*s.model, p);
    std::string runs;
    for (std::size_t i = 0; i < layers.size();) {
      std::size_t j = i;
      while (j < layers.size() && layers[j] == layers[i]) ++j;
      runs += (runs.empty() ? "" : ", ") + std::to_string(layers[i]) +
              (j - i > 1 ? " x " + std::to_string(j - i) : "");
      i = j;
    }
    out += fmt::format("  layers per rank       {}\n", runs);
  }
  out += fmt::format("  iteration time        {:.3f} ms\n", e.iteration_time_s * 1e3);
  if (s.model) {
    out += fmt::format("  throughput            {:.0f} tokens/s, {:.1f} TFLOP/s per GPU\n",
                       e.tokens_per_s, e.model_tflops_per_gpu);
    out += fmt::format("  MFU                   {:.1f}%\n", 100 * e.mfu);
  }
  out += fmt::format("  pipeline bubble       {:.1f}%\n", 100 * e.bubble_fraction);
  if (e.stage_span_bubble_rate) {
    out += fmt::format("  stage-span bubble     {:.1f}% (Zero Bubble paper's rate)\n",
                       100 * *e.stage_span_bubble_rate);
  }
  out +=
      fmt::format("  exposed communication {:.1f}% of the step\n", 100 * e.exposed_comm_fraction);
  out += fmt::format("  simulated             {} ranks, {} tasks{}\n", e.result.ranks.size(),
                     e.step.graph.num_tasks(),
                     e.step.replicas < p.dp ? " (one data-parallel replica, symmetric)" : "");
  if (!s.model) return out;
  const auto capacity = static_cast<double>(s.hardware.gpu.hbm_capacity);
  out += fmt::format("  peak memory per pipeline rank (GiB, of {}):\n", gib(capacity));
  std::string warnings;
  for (std::int32_t r = 0; r < e.step.pipeline_ranks; ++r) {
    const double peak = e.peak_memory_bytes[static_cast<std::size_t>(r)];
    const double state = e.step.state_bytes[static_cast<std::size_t>(r)];
    out += fmt::format("    rank {:>3}  {:>7} = state {:>6} + activations {:>6}{}\n", r, gib(peak),
                       gib(state), gib(peak - state), peak > capacity ? "  DOES NOT FIT" : "");
    if (peak > capacity) {
      warnings += fmt::format(
          "warning: pipeline rank {} needs {} GiB, more than the {} GiB of "
          "one {}\n",
          r, gib(peak), gib(capacity), s.hardware.gpu.name);
    }
  }
  return out + warnings;
}

}  // namespace metron::scenario
