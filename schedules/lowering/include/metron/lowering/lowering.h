#pragma once
// Lowering passes: small pure functions that take a schedule's compute Order to a validated
// ir::Graph (docs/ARCHITECTURE.md, "Schedules and policies"). Each is tested input -> expected
// output.
//
//   pipeline::Order order = pipeline::generate_order(spec);
//   ir::Graph g = lower(order, {.p2p = P2PMode::kAsync});
//
// The passes, in the order lower() chains them:
//   split_backward      B(s,mb) -> I(s,mb) W(s,mb) in place; OVERLAP_F_B units stay whole
//   add_p2p_async       PyTorch's _add_send_recv (ASAP SEND after the producer, RECV on the
//                       peer; Megatron overlap_p2p_comm): isend/irecv on pp-send-<peer> /
//                       pp-recv-<peer> streams; nothing between stages on one rank (V placement)
//   add_p2p_batched     Megatron's blocking batched exchanges (send_forward_recv_backward and
//                       friends): one step's sends and receives issued together and waited on
//                       by the host (WAIT) before the next compute, never deadlocking,
//                       including PP=2; one stage per rank or Megatron's interleaved loop
//                       placement (V placement and OVERLAP_F_B units: InvalidConfig, use kAsync)
//   add_optimizer_step  STEP (tagged with the rank's lowest stage) at the end of every rank's row
//   rows_to_graph       (metron::ir) the graph, with same-rank dependencies and every p2p
//                       transfer sized p2p_bytes
//   add_encoder_output_transfers  (encoder_decoder_split set) Megatron's T5: a second
//                       transfer (the encoder output) on every boundary from the split stage on
//   add_memory_effects  F stashes its activation, I turns it into the weight-gradient stash,
//                       W or B frees; deallocate_output_tensor frees a sent output right after
//                       the send (else it lives until the backward)
//   assign_layers       layer ranges per stage (even, explicit list, or first/last counts)
// Each row pass keeps the rows' groups and drops nothing but the idle slots it consumes.

#include <cstdint>
#include <optional>
#include <vector>

#include "metron/ir/graph.h"
#include "metron/ir/graph_builder.h"
#include "metron/pipeline/schedule_spec.h"

namespace metron::lowering {

enum class P2PMode : std::uint8_t {
  kNone,     ///< compute only (the graph then has no cross-rank edges)
  kAsync,    ///< isend/irecv, as Megatron's overlap_p2p_comm and PyTorch's runtime
  kBatched,  ///< Megatron's default blocking batched exchanges
};

/// Which transformer layers each global stage holds.
struct LayerAssignment {
  std::optional<std::int32_t> layers;   ///< total, split evenly over stages
  std::vector<std::int32_t> per_stage;  ///< explicit counts, one per stage
                                        ///< (checked against `layers` if set)
  /// Megatron's first/last-stage counts (need `layers`); the rest split evenly over the others.
  std::optional<std::int32_t> first_stage, last_stage;

  /// Whether any layer option is set (without one, compute tasks keep empty layer ranges).
  [[nodiscard]] bool any() const {
    return layers.has_value() || !per_stage.empty() || first_stage.has_value() ||
           last_stage.has_value();
  }
};

struct LoweringOptions {
  P2PMode p2p = P2PMode::kAsync;
  /// Every rank's hardware queues (ir::Rank): 1 reproduces CUDA_DEVICE_MAX_CONNECTIONS=1.
  std::int32_t hardware_queues = 8;
  bool split_backward = false;  ///< B -> I W
  bool optimizer_step = true;
  bool memory_effects = true;
  bool deallocate_output = true;       ///< Megatron's deallocate_output_tensor
  std::int64_t activation_bytes = 1;   ///< one microbatch's activation on one stage (M_B)
  std::int64_t weight_grad_bytes = 1;  ///< the weight-gradient stash I leaves for W (M_W)
  /// Per global stage, in place of activation_bytes and weight_grad_bytes when not empty:
  /// stages of different layer counts stash different amounts (Note [uneven stages] in
  /// models/parallel_spec.h).
  std::vector<std::int64_t> stage_activation_bytes, stage_weight_grad_bytes;
  std::int64_t p2p_bytes = 1;  ///< one boundary tensor, as each transfer carries it
  /// The memory of the output tensor a stage sends; nullopt: p2p_bytes. Larger under the
  /// pipeline scatter/gather, which sends 1/tp of it (Note [pipeline scatter/gather]).
  std::optional<std::int64_t> output_bytes;
  /// Megatron's pipeline split rank for encoder-and-decoder models (stages before it encode).
  std::optional<std::int32_t> encoder_decoder_split;
  std::int64_t encoder_output_bytes = 1;  ///< the second tensor decoder stages exchange
  LayerAssignment layers;
};

/// B(s,mb) -> I(s,mb) W(s,mb) in place (idle slots and OVERLAP_F_B units kept).
pipeline::Order split_backward(const pipeline::Order& order);
/// PyTorch's _add_send_recv (Note [ASAP send/recv insertion] in p2p_async.cc); the result has no
/// idle slots. Throws InvalidConfig when a stage is on two ranks or the order cannot run.
pipeline::Order add_p2p_async(const pipeline::Order& order);
/// Megatron's blocking exchanges (Note [batched p2p steps] in p2p_batched.cc; interleaved orders:
/// Note [batched interleaved exchanges]). Throws InvalidConfig for V placement, orders that are
/// not Megatron's, and OVERLAP_F_B units (use add_p2p_async).
pipeline::Order add_p2p_batched(const pipeline::Order& order);
/// STEP at the end of every non-empty row (by value: lower() hands its rows over, not a copy).
pipeline::Order add_optimizer_step(pipeline::Order order);
/// Set in the tag of a transfer's encoder-output twin; ir::p2p_tag stays below it for every
/// stage < 2^41, so the two can never collide.
inline constexpr std::int64_t kEncoderOutputTagBit = std::int64_t{1} << 62;
/// Twins every transfer on a boundary (s -> s+1) with s >= split_stage (Note [encoder output
/// transfers] in encoder_decoder.cc); tasks keep their ids. Throws InvalidConfig unless
/// 1 <= split_stage < stages.
ir::Graph add_encoder_output_transfers(const ir::Graph& graph, std::int32_t split_stage,
                                       std::int64_t encoder_output_bytes);
/// Buffers per Note [pipeline memory effects] (memory_effects.cc); tasks keep their ids.
ir::Graph add_memory_effects(const ir::Graph& graph, const LoweringOptions& options);
/// The same on a builder, before validation (see lower_unvalidated).
void add_memory_effects(ir::GraphBuilder& builder, const LoweringOptions& options);
/// Layer ranges per global stage; throws InvalidConfig when layers do not divide as asked (naming
/// the nearest valid counts), when per_stage has the wrong length, or when nothing is given.
std::vector<ir::LayerRange> assign_layers(const LayerAssignment& layers, std::int32_t stages);
/// Sets Task::layers of compute tasks (and of OVERLAP_F_B backward halves) from their stage; the
/// optimizer step and communication keep empty ranges.
ir::Graph assign_layers(const ir::Graph& graph, const std::vector<ir::LayerRange>& ranges);
/// The same on a builder, before validation (see lower_unvalidated).
void assign_layers(ir::GraphBuilder& builder, const std::vector<ir::LayerRange>& ranges);

/// The whole chain. Throws InvalidConfig or InvalidGraph.
ir::Graph lower(const pipeline::Order& order, const LoweringOptions& options);

/// lower() up to its final validation: the builder, for callers that add more (the data-parallel
/// passes) and validate once — build() validates the whole graph each time, which dominates the
/// cost of building a step. std::move(lower_unvalidated(o, opt)).build() == lower(o, opt).
ir::GraphBuilder lower_unvalidated(const pipeline::Order& order, const LoweringOptions& options);

}  // namespace metron::lowering
