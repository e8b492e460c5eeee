#pragma once
// Private: the storage behind ir::Graph and the results validation hands to index building.

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "metron/ir/graph.h"

namespace metron::ir {

/// Compressed rows: row i is items[offsets[i] .. offsets[i+1]).
struct CompressedRows {
  std::vector<std::int32_t> offsets{0};
  std::vector<TaskId> items;

  [[nodiscard]] std::span<const TaskId> row(std::size_t i) const {
    return {items.data() + offsets[i], items.data() + offsets[i + 1]};
  }
  [[nodiscard]] std::size_t num_rows() const { return offsets.size() - 1; }
  void add_row(std::span<const TaskId> row) {
    items.insert(items.end(), row.begin(), row.end());
    offsets.push_back(static_cast<std::int32_t>(items.size()));
  }
};

/// What validation learns on the way and index building reuses.
struct Validation {
  std::vector<std::string> problems;
  std::vector<std::int32_t> issue_position;  ///< per task; -1 when missing from the issue order
  std::vector<std::int32_t> comm_instance;   ///< per task; -1 for compute and host-wait
  CompressedRows comm_members;               ///< per instance
  CompressedRows dependents;                 ///< per task: who waits for it (usable tasks only)
};

struct Graph::Impl {
  GraphData data;
  std::vector<std::int32_t> issue_position;
  std::vector<std::vector<StreamId>> rank_streams;
  std::vector<std::int32_t> stream_queue;
  CompressedRows stream_tasks;  ///< per stream, in issue order
  std::vector<TaskId> stream_pred;
  std::vector<TaskId> stream_succ;
  std::vector<TaskId> queue_pred;
  std::vector<TaskId> queue_succ;
  CompressedRows dependents;  ///< per task
  std::vector<std::int32_t> comm_instance;
  CompressedRows comm_members;
  // FlatIndex (graph_index.cc).
  std::vector<TaskFacts> task_facts;
  std::vector<BufferId> buffer_effects;
  std::vector<CommFacts> comm_facts;
};

/// Validates everything (validate.cc); problems empty means the graph is well formed.
Validation validate_graph(const GraphData& data);

/// Sends with receives and collectives across members (comm_matching.cc). Appends problems; fills
/// comm_instance / comm_members for fully matched instances. `usable[t]` says whether task t's
/// references are in range (others are skipped: their problems are already reported).
void match_communication(const GraphData& data, const std::vector<char>& usable,
                         Validation& validation);

/// Who waits for each task: tasks listing it in deps, and host waits on it. Edges touching an
/// unusable task are left out (graph_index.cc).
CompressedRows dependents_of(const GraphData& data, const std::vector<char>& usable);

/// Appends one problem per cycle in `dependents` (dependency_cycles.cc).
void check_dependency_cycles(const GraphData& data, const CompressedRows& dependents,
                             std::vector<std::string>& problems);

/// Builds the indexes of a validated graph (graph_index.cc).
Graph::Impl build_graph_index(GraphData data, Validation validation);

}  // namespace metron::ir
