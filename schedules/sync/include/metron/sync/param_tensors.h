#pragma once
// The parameters a data-parallel wrapper sees on one rank: per model chunk, the tensors in module
// registration order, each tagged with the layer whose forward reads it and whose backward
// produces its gradient. The sync-policy passes (sync_policy.h) bucket, shard and gather them;
// models::parameter_tensors (metron/models/parameter_tensors.h) says what they are for a model.

#include <cstdint>
#include <string>
#include <vector>

namespace metron::sync {

/// One parameter tensor, as this rank holds it (its tensor-parallel slice).
struct ParamTensor {
  std::string name;  ///< "layers.3.mlp.fc1.weight": for listings and bucket dumps
  /// The global transformer layer whose forward reads the tensor and whose backward produces its
  /// gradient. The embedding counts as its chunk's first layer, the final norm and LM head as its
  /// chunk's last one: a pass working at layer granularity sees the embedding's gradient ready at
  /// the end of the chunk's backward and the head's with its last layer.
  std::int32_t layer = 0;
  std::int64_t numel = 0;         ///< elements on this rank
  bool expert = false;            ///< an MoE expert weight: reduced over expert data parallelism
  bool shared_embedding = false;  ///< word embeddings tied with the LM head (own Megatron bucket)
  /// Outside the transformer layers (embeddings, final norm, LM head): the root module's own
  /// parameters, which FSDP's transformer wrapping leaves in the root unit.
  bool outside_layers = false;
  friend bool operator==(const ParamTensor&, const ParamTensor&) = default;
};

/// The parameters of one model chunk (one stage held by a rank), in registration order.
struct ChunkParams {
  std::int32_t stage = 0;  ///< the global stage, as ir::Task::stage
  std::vector<ParamTensor> tensors;
  friend bool operator==(const ChunkParams&, const ChunkParams&) = default;
};

}  // namespace metron::sync
