#pragma once
// The communication groups the lowering passes create, and how their names say which parallel
// dimension they belong to. A graph holds the ranks of one pipeline (times its data-parallel
// replicas in full mode), never a tensor-, context- or expert-parallel peer: those groups have the
// graph's rank as their only member, and a cost model charges their collectives for the real
// group (plan/step_builder.h). The name is "<kind>" + "<graph rank or pipeline rank>", e.g. "tp3",
// "dp0", "edp1", "dp-intra0".

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace metron::lowering {

enum class GroupKind : std::uint8_t {
  kTensor,       ///< "tp": tensor (and sequence) parallel
  kContext,      ///< "cp": context parallel
  kExpert,       ///< "ep": expert parallel (all-to-all)
  kData,         ///< "dp": data parallel × context parallel, dense gradients
  kExpertData,   ///< "edp": expert data parallel, expert gradients
  kDataIntra,    ///< "dp-intra": one distributed-optimizer instance, or an HSDP shard group
  kDataInter,    ///< "dp-inter": across instances, or an HSDP replicate group
  kExpertIntra,  ///< "edp-intra": the expert counterpart of kDataIntra
  kExpertInter,  ///< "edp-inter": the expert counterpart of kDataInter
  /// "pp-copies": DualPipe's pipeline ranks r and P-1-r, which hold copies of the same two model
  /// stages and sum their gradients (sync/stage_copies.h)
  kStageCopies,
  /// "embedding": Megatron's embedding group, the pipeline ranks holding the first and the last
  /// model stage, which sum the gradients of their copies of tied word embeddings
  /// (sync/embedding_grads.h)
  kEmbedding,
};

/// "tp", "cp", "ep", "dp", "edp", "dp-intra", "dp-inter", "edp-intra", "edp-inter", "pp-copies",
/// "embedding".
std::string_view to_string(GroupKind kind) noexcept;
/// The group's name: to_string(kind) + index.
std::string group_name(GroupKind kind, std::int32_t index);
/// The kind a group name starts with; nullopt for names no pass makes (pipeline "pp" groups,
/// hand-written graphs).
std::optional<GroupKind> group_kind(std::string_view name) noexcept;

}  // namespace metron::lowering
