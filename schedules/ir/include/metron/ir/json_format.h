#pragma once
// The JSON form of a whole graph: lossless, so that graph_from_json(to_json(g)) == g and
// to_json(graph_from_json(text)) == text for canonical text. Note [graph JSON]:
//
//   {
//     "format": "metron-graph",
//     "version": 1,
//     "ranks": [
//       {"id":0,"hardware_queues":1,"coords":{"tp":0,"pp":1,"dp":0,"cp":0,"ep":0}}
//     ],
//     "streams": [
//       {"id":0,"rank":0,"name":"compute"}
//     ],
//     "groups": [
//       {"id":0,"name":"dp0","ranks":[0,2]}
//     ],
//     "buffers": [
//       {"id":0,"rank":0,"bytes":1024,"name":"act s0 mb0"}
//     ],
//     "tasks": [
//       {"id":0,"rank":0,"stream":0,"kind":"compute","phase":"forward","stage":0,"microbatch":0}
//     ],
//     "issue_order": [
//       [0]
//     ]
//   }
//
// Required: format, version, every entity's id, the rank of streams, buffers and tasks, names,
// a group's ranks, a task's kind and its kind's essentials (compute: phase; collective: op,
// group, bytes, seq; send/recv: peer, bytes, tag; host-wait: target). Any whitespace is accepted
// when reading.
//
// Ids are positions and must equal them. Fields holding a default (a "none" id, an empty list or
// string, 0, fp32, 8 queues, ...) are left out when writing and filled in when reading.

#include <string>
#include <string_view>

#include "metron/base/diagnostics.h"
#include "metron/ir/graph.h"

namespace metron::ir {

/// The canonical JSON text of a graph: one top-level key per line, one rank, stream, group,
/// buffer, task or issue-order list per line (compact), keys in a fixed order, final newline.
std::string to_json(const Graph& graph);

/// Reads and validates a graph. Malformed JSON throws ParseError at source:line:col; a wrong type
/// or value throws ParseError naming the JSON path (`tasks[3].kind: expected one of ...`);
/// an invalid graph throws InvalidGraph. Unknown keys are counted in `diagnostics` when given.
Graph graph_from_json(std::string_view text, const std::string& source = "<json>",
                      Diagnostics* diagnostics = nullptr);

}  // namespace metron::ir
