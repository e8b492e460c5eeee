// Note [world layout] (world_layout.h).

#include "metron/scenario/world_layout.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "metron/lowering/comm_groups.h"

namespace metron::scenario {
namespace {

/// Sizes of the world's dimensions, and the group sizes the sync options imply.
struct World {
  std::int64_t tp = 1;
  std::int64_t cp = 1;
  std::int64_t dp = 1;
  std::int64_t pp = 1;
  std::int64_t ep = 1;
  std::int64_t intra = 1;         ///< ranks of one distributed-optimizer instance (or HSDP shard)
  std::int64_t expert_intra = 1;  ///< the same over the expert data-parallel index

  [[nodiscard]] std::int64_t data() const { return dp * cp; }
  [[nodiscard]] std::int64_t rank(std::int64_t t, std::int64_t d, std::int64_t p) const {
    return t + tp * (d + data() * p);
  }
};

World world_of(const Scenario& s) {
  const models::ParallelSpec& mp = s.parallel;
  World w{.tp = std::max<std::int64_t>(1, mp.tp),
          .cp = std::max<std::int64_t>(1, mp.cp),
          .dp = std::max<std::int64_t>(1, mp.dp),
          .pp = std::max<std::int64_t>(1, mp.pp),
          .ep = std::max<std::int64_t>(1, mp.ep)};
  const std::int64_t instances = std::max<std::int32_t>(1, s.sync.distributed_optimizer_instances);
  w.intra = s.sync.hsdp_shard_size ? *s.sync.hsdp_shard_size : w.data() / instances;
  w.intra = std::clamp<std::int64_t>(w.intra, 1, w.data());
  const std::int64_t expert_dp = std::max<std::int64_t>(1, w.data() / w.ep);
  // As the step builder charges expert groups (step_builder.cc, placement_of).
  w.expert_intra = std::clamp<std::int64_t>(expert_dp * w.intra / w.data(), 1, expert_dp);
  return w;
}

/// Where a graph rank sits: (t, d, p) of the formula in Note [world layout].
struct Coords {
  std::int64_t t = 0;
  std::int64_t d = 0;
  std::int64_t p = 0;
};

Coords coords_of(const World& w, const ir::RankCoords& c) {
  return {.t = c.tp, .d = c.cp + w.cp * c.dp, .p = c.pp};
}

/// The data-parallel indices d' of the group of `kind` holding index d (Note [world layout]).
std::vector<std::int64_t> data_indices(const World& w, lowering::GroupKind kind, std::int64_t d) {
  std::vector<std::int64_t> out;
  const std::int64_t expert_dp = std::max<std::int64_t>(1, w.data() / w.ep);
  const std::int64_t e = d % w.ep;  // index inside an expert-parallel block
  const std::int64_t j = d / w.ep;  // expert data-parallel index
  switch (kind) {
    case lowering::GroupKind::kContext:
      for (std::int64_t c = 0; c < w.cp; ++c) out.push_back(d - d % w.cp + c);
      break;
    case lowering::GroupKind::kData:
      for (std::int64_t k = 0; k < w.data(); ++k) out.push_back(k);
      break;
    case lowering::GroupKind::kExpert:
      for (std::int64_t k = 0; k < w.ep; ++k) out.push_back(j * w.ep + k);
      break;
    case lowering::GroupKind::kExpertData:
      for (std::int64_t k = 0; k < expert_dp; ++k) out.push_back(e + w.ep * k);
      break;
    case lowering::GroupKind::kDataIntra:
      for (std::int64_t k = 0; k < w.intra; ++k) out.push_back(d - d % w.intra + k);
      break;
    case lowering::GroupKind::kDataInter:
      for (std::int64_t k = 0; k < w.data() / w.intra; ++k)
        out.push_back(d % w.intra + w.intra * k);
      break;
    case lowering::GroupKind::kExpertIntra:
      for (std::int64_t k = 0; k < w.expert_intra; ++k) {
        out.push_back(e + w.ep * (j - j % w.expert_intra + k));
      }
      break;
    case lowering::GroupKind::kExpertInter:
      for (std::int64_t k = 0; k < expert_dp / w.expert_intra; ++k) {
        out.push_back(e + w.ep * (j % w.expert_intra + w.expert_intra * k));
      }
      break;
    case lowering::GroupKind::kTensor:
    case lowering::GroupKind::kStageCopies:  // the pair spans pipeline ranks, not replicas
    case lowering::GroupKind::kEmbedding:
      out.push_back(d);
      break;
  }
  return out;
}

/// Megatron-LM's group_desc for a group of `kind` (megatron/core/parallel_state.py).
std::string description(lowering::GroupKind kind, const World& w) {
  switch (kind) {
    case lowering::GroupKind::kTensor:
      return "TENSOR_MODEL_PARALLEL_GROUP";
    case lowering::GroupKind::kContext:
      return "CONTEXT_PARALLEL_GROUP";
    case lowering::GroupKind::kExpert:
      return "EXPERT_MODEL_PARALLEL_GROUP";
    case lowering::GroupKind::kData:
      return w.cp > 1 ? "DATA_PARALLEL_GROUP_WITH_CP" : "DATA_PARALLEL_GROUP";
    case lowering::GroupKind::kExpertData:
      return "EXPERT_DATA_PARALLEL_GROUP";
    case lowering::GroupKind::kDataIntra:
      return "INTRA_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP";
    case lowering::GroupKind::kDataInter:
      return "INTER_PARTIAL_DATA_PARALLEL_GROUP_WITH_CP";
    case lowering::GroupKind::kExpertIntra:
      return "INTRA_PARTIAL_EXPERT_DATA_PARALLEL_GROUP";
    case lowering::GroupKind::kExpertInter:
      return "INTER_PARTIAL_EXPERT_DATA_PARALLEL_GROUP";
    case lowering::GroupKind::kStageCopies:
      // Megatron has no DualPipe; DeepSeek's example sums the copies over the world group.
      return "PIPELINE_STAGE_COPIES_GROUP";
    case lowering::GroupKind::kEmbedding:
      return "EMBEDDING_GROUP";
  }
  return "";
}

}  // namespace

timelines::WorldLayout world_layout(const Scenario& scenario, const ir::Graph& graph) {
  const World w = world_of(scenario);
  timelines::WorldLayout layout;
  layout.world_size = w.tp * w.data() * w.pp;
  const std::int64_t per_node = std::max<std::int64_t>(1, scenario.hardware.gpus_per_node);
  for (std::int32_t r = 0; r < graph.num_ranks(); ++r) {
    const Coords c = coords_of(w, graph.rank(ir::RankId{r}).coords);
    const std::int64_t world = w.rank(c.t, c.d, c.p);
    layout.world_rank.push_back(world);
    layout.local_device.push_back(world % per_node);
  }
  std::map<std::pair<std::string, std::vector<std::int64_t>>, std::string> names;
  for (const ir::Group& group : graph.data().groups) {
    timelines::GroupNaming naming;
    const std::optional<lowering::GroupKind> kind = lowering::group_kind(group.name);
    if (kind && !group.ranks.empty()) {
      const Coords c = coords_of(w, graph.rank(group.ranks.front()).coords);
      naming.description = description(*kind, w);
      if (*kind == lowering::GroupKind::kTensor) {
        for (std::int64_t t = 0; t < w.tp; ++t) naming.world_ranks.push_back(w.rank(t, c.d, c.p));
      } else if (*kind == lowering::GroupKind::kStageCopies) {
        naming.world_ranks = {w.rank(c.t, c.d, c.p), w.rank(c.t, c.d, w.pp - 1 - c.p)};
      } else if (*kind == lowering::GroupKind::kEmbedding) {
        naming.world_ranks = {w.rank(c.t, c.d, 0), w.rank(c.t, c.d, w.pp - 1)};
      } else {
        for (std::int64_t d : data_indices(w, *kind, c.d)) {
          naming.world_ranks.push_back(w.rank(c.t, d, c.p));
        }
      }
    } else {
      naming.description = group.name;
      for (ir::RankId m : group.ranks) {
        naming.world_ranks.push_back(layout.world_rank[static_cast<std::size_t>(m.value())]);
      }
    }
    std::sort(naming.world_ranks.begin(), naming.world_ranks.end());
    auto [it, added] = names.try_emplace({naming.description, naming.world_ranks}, "");
    if (added) it->second = std::to_string(names.size());
    naming.pg_name = it->second;
    layout.groups.push_back(std::move(naming));
  }
  for (std::int32_t r = 0; r < graph.num_ranks(); ++r) {
    const Coords c = coords_of(w, graph.rank(ir::RankId{r}).coords);
    timelines::GroupNaming naming{.description = "PIPELINE_MODEL_PARALLEL_GROUP"};
    for (std::int64_t p = 0; p < w.pp; ++p) naming.world_ranks.push_back(w.rank(c.t, c.d, p));
    auto [it, added] = names.try_emplace({naming.description, naming.world_ranks}, "");
    if (added) it->second = std::to_string(names.size());
    naming.pg_name = it->second;
    layout.pipeline_groups.push_back(std::move(naming));
  }
  return layout;
}

sim::TraceOptions trace_options(const Scenario& scenario, const Step& step) {
  sim::TraceOptions options;
  options.layout = world_layout(scenario, step.graph);
  if (!step.state_bytes.empty()) {
    for (std::int32_t r = 0; r < step.graph.num_ranks(); ++r) {
      // As evaluate() adds it to the peak: by pipeline rank, whatever the replica.
      const auto pipeline_rank = static_cast<std::size_t>(r % step.pipeline_ranks);
      options.static_memory_bytes.push_back(std::llround(step.state_bytes[pipeline_rank]));
    }
  }
  return options;
}

}  // namespace metron::scenario
