// add_encoder_output_transfers: Megatron's encoder-and-decoder pipelines (T5), where stages from
// the split on exchange two tensors per microbatch (the decoder hidden state and the encoder
// output) instead of one.
//
// Note [encoder output transfers]: Megatron's get_tensor_shapes(stage) is one tensor before the
// split k and two from k on; a stage sends with its own shapes and receives with its sender's.
// So the boundary (s -> s+1) carries two tensors exactly when s >= k, activations and gradients
// alike (k-1 -> k carries one: the first decoder stage receives only the encoder output). The
// second tensor of a pair is a twin of the first: same ranks, streams, kind and deps, issued right
// after it, tagged first.tag | kEncoderOutputTagBit. Anything waiting for the first transfer
// (a dependency or a host WAIT, as Megatron's batched exchange waits on every request) waits
// for the twin as well.

#include <algorithm>
#include <string>
#include <vector>

#include "metron/base/error.h"
#include "metron/ir/graph_builder.h"
#include "metron/lowering/lowering.h"

namespace metron::lowering {
namespace {

using ir::TaskId;

constexpr const char* kWhere = "add_encoder_output_transfers: ";

std::int32_t num_stages(const ir::Graph& graph) {
  std::int32_t stages = 0;
  for (const ir::Task& t : graph.tasks()) {
    if (t.stage.valid()) stages = std::max(stages, t.stage.value() + 1);
  }
  return stages;
}

void check_inputs(const ir::Graph& graph, std::int32_t split, std::int64_t bytes) {
  const std::int32_t stages = num_stages(graph);
  if (split < 1 || split >= stages) {
    throw InvalidConfig(std::string(kWhere) + "split stage is " + std::to_string(split) +
                        "; expected 1 <= split < " + std::to_string(stages) +
                        " (the number of stages)");
  }
  if (bytes < 0) {
    throw InvalidConfig(std::string(kWhere) + "encoder_output_bytes is " + std::to_string(bytes) +
                        "; expected >= 0");
  }
}

// The lower stage s of the boundary (s -> s+1) a matched pair crosses, or -1 when the pair is
// not a pipeline transfer (kind "other", untagged stages).
std::int32_t boundary_of(const ir::Task& send, const ir::Task& recv) {
  const auto what = std::get<ir::Send>(send.op).what;
  if (what == ir::P2PKind::kOther) return -1;
  // Activations flow s -> s+1 (the send is on s); gradients flow s+1 -> s (the recv is on s).
  const ir::StageId lower = what == ir::P2PKind::kActivation ? send.stage : recv.stage;
  return lower.valid() ? lower.value() : -1;
}

// The twin of a send or recv: same rank, stream, tags and deps; new tag and size, no buffers.
ir::Task twin_of(const ir::Graph& graph, TaskId first, std::int64_t bytes) {
  ir::Task t = graph.task(first);
  t.allocates.clear();
  t.uses.clear();
  std::visit(
      [&](auto& op) {
        if constexpr (requires { op.tag; }) {
          if (op.tag < 0 || (op.tag & kEncoderOutputTagBit) != 0) {
            throw InvalidConfig(std::string(kWhere) + graph.describe(first) + " has tag " +
                                std::to_string(op.tag) + "; expected 0 <= tag < 2^62");
          }
          op.tag |= kEncoderOutputTagBit;
          op.bytes = bytes;
        }
      },
      t.op);
  return t;
}

// twin[i]: the task added right after task i in its rank's issue order, or none.
std::vector<TaskId> add_twins(const ir::Graph& graph, ir::GraphBuilder& b, std::int32_t split,
                              std::int64_t bytes) {
  std::vector<TaskId> twin(static_cast<std::size_t>(graph.num_tasks()));
  for (std::int32_t i = 0; i < graph.num_comm_instances(); ++i) {
    const auto members = graph.comm_members(i);
    if (members.size() != 2 || graph.task(members[0]).kind() != ir::TaskKind::kSend) continue;
    if (boundary_of(graph.task(members[0]), graph.task(members[1])) < split) continue;
    for (TaskId end : members) twin[end.index()] = b.add(twin_of(graph, end, bytes));
  }
  // A host WAIT on a twinned transfer gets a twin WAIT on the twin.
  for (std::int32_t i = 0; i < graph.num_tasks(); ++i) {
    const ir::Task& t = graph.task(TaskId{i});
    const auto* wait = std::get_if<ir::HostWait>(&t.op);
    if (wait == nullptr || !twin[wait->target.index()].valid()) continue;
    ir::Task w = t;
    w.op = ir::HostWait{.target = twin[wait->target.index()]};
    twin[static_cast<std::size_t>(i)] = b.add(std::move(w));
  }
  return twin;
}

// Twins copied their firsts' deps, so they too wait for the twins of what their firsts wait for.
void add_twin_deps(ir::GraphBuilder& b, const std::vector<TaskId>& twin) {
  const auto tasks = static_cast<std::int32_t>(b.data().tasks.size());
  for (std::int32_t i = 0; i < tasks; ++i) {
    std::vector<TaskId>& deps = b.task(TaskId{i}).deps;
    const std::size_t original = deps.size();
    for (std::size_t d = 0; d < original; ++d) {
      if (const TaskId second = twin[deps[d].index()]; second.valid()) deps.push_back(second);
    }
  }
}

void issue_twins_after_firsts(const ir::Graph& graph, ir::GraphBuilder& b,
                              const std::vector<TaskId>& twin) {
  for (std::int32_t r = 0; r < graph.num_ranks(); ++r) {
    std::vector<TaskId> order;
    for (TaskId id : graph.issue_order(ir::RankId{r})) {
      order.push_back(id);
      if (twin[id.index()].valid()) order.push_back(twin[id.index()]);
    }
    b.set_issue_order(ir::RankId{r}, std::move(order));
  }
}

}  // namespace

ir::Graph add_encoder_output_transfers(const ir::Graph& graph, std::int32_t split_stage,
                                       std::int64_t encoder_output_bytes) {
  check_inputs(graph, split_stage, encoder_output_bytes);
  ir::GraphBuilder b(graph);
  const std::vector<TaskId> twin = add_twins(graph, b, split_stage, encoder_output_bytes);
  add_twin_deps(b, twin);
  issue_twins_after_firsts(graph, b, twin);
  return std::move(b).build();
}

}  // namespace metron::lowering
