#pragma once
// Export of a task graph as MLCommons Chakra execution traces, the workload format of ASTRA-sim
// (docs/TRACES.md §3, §6.4): one `<prefix>.<rank>.et` file per rank plus the communicator groups
// as `<prefix>.comm_group.json`, ASTRA-sim's --comm-group-configuration.
//
// Note [chakra export]
// --------------------
// Each file is a GlobalMetadata message (version "0.0.4"; attributes schema = "metron", pid =
// rank, num_ranks) followed by one Node per task of that rank, every message preceded by its
// length as a varint32 (docs/TRACES.md §3.2). Node id = TaskId (ids are global, so a node names
// the same task in every file and in the graph JSON).
//
// Nodes (attribute oneof cases exactly as docs/TRACES.md §3.3; `is_cpu_op` = false on all):
//   - Compute    -> COMP_NODE, num_ops (int64, flops), tensor_size (uint64, bytes moved).
//   - Collective -> COMM_COLL_NODE, comm_type (int64, CollectiveCommType), comm_size (int64,
//                   bytes, the task's total when it stands for `count` collectives), pg_name
//                   (string): GroupId + 1, because ASTRA-sim reads "" and "0" as all ranks.
//   - Send/Recv  -> COMM_SEND_NODE / COMM_RECV_NODE, comm_src / comm_dst (int32, graph ranks),
//                   comm_tag (int32) = Graph::comm_instance, the same on both ends and unique per
//                   transfer, and comm_size (int64).
//   - HostWait   -> COMP_NODE named "host wait: ...", num_ops = tensor_size = 0: it carries the
//                   ordering below, so the host's blocking is kept although ASTRA-sim has no host.
// duration_micros is the task's duration rounded to the nearest whole microsecond (every node
// type; ASTRA-sim replays compute and broadcasts for it): a positive duration under 0.5 µs
// becomes 0, which ASTRA-sim runs as 1 ns. Keep metron's own ns outputs as the precise record.
//
// Dependencies (data_deps only, since the legacy feeder reads nothing else; docs/TRACES.md
// §3.3), sorted and without repeats: node t depends on
//   1. its Task::deps (event waits), and a HostWait on its target;
//   2. the task before it on its stream (streams complete in order);
//   3. the last HostWait its rank issued before it: the host issues nothing past a HostWait until
//      the awaited task completes (Note [ordering rules] in metron/ir/ordering.h, rule 1), and
//      HostWaits chain through this rule, so every later task waits for every earlier wait.
// Rule 4 of Note [ordering rules] (hardware-queue order: a predecessor has *started*) and rule 5
// (rendezvous of communication members) have no Chakra form and are left out; ASTRA-sim matches
// communication itself. Every edge is a completion the simulator waits for too, so a graph that
// cannot deadlock gives acyclic files. Nodes are written parents first: in id order wherever that
// is already topological, smallest ready id next where a task depends on a later id.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "metron/base/file_io.h"
#include "metron/ir/graph.h"

namespace metron::chakra {

/// The Chakra schema version written in GlobalMetadata (the one other generators write).
inline constexpr const char* kChakraVersion = "0.0.4";

/// The files write_chakra_traces writes for `prefix` in `directory`: rank r's trace at [r], then
/// the comm-group JSON.
std::vector<std::string> chakra_trace_paths(const std::string& directory, const std::string& prefix,
                                            std::int32_t num_ranks);

/// The files of Note [chakra export] (paths as chakra_trace_paths gives them, and their bytes),
/// for a caller that writes them with its other outputs all or nothing. Throws as
/// write_chakra_traces does, IoError excepted.
std::vector<OutputFile> chakra_trace_files(const ir::Graph& graph,
                                           std::span<const std::int64_t> durations_ns,
                                           const std::string& directory,
                                           const std::string& prefix = "metron");

/// Writes the Chakra traces of Note [chakra export] for `graph` with per-task `durations_ns`
/// (indexed by TaskId, as scenario::Step::durations), all or nothing, creating `directory` when
/// missing. Returns the paths written (chakra_trace_paths). Throws InvalidConfig for a duration
/// count other than the task count, a negative duration, or an empty or path-like prefix;
/// InvalidGraph when the dependencies of Note [chakra export] form a cycle; IoError when the
/// files cannot be written.
/// @code
///   const scenario::Step step = scenario::build_step(s);
///   for (const std::string& path : chakra::write_chakra_traces(step.graph, step.durations, "et"))
///     std::cout << path << "\n";  // et/metron.0.et, et/metron.1.et, ...,
///     et/metron.comm_group.json
/// @endcode
std::vector<std::string> write_chakra_traces(const ir::Graph& graph,
                                             std::span<const std::int64_t> durations_ns,
                                             const std::string& directory,
                                             const std::string& prefix = "metron");

}  // namespace metron::chakra
