#pragma once
// `metron schedule --sync NAME --with-comms --format text`: every rank's collectives and host
// waits in host issue order, one per line, so a person can check a sync policy against
// docs/SYNC_POLICIES.md: position among the rank's tasks, op, group, bytes, dtype, bucket, chunk,
// microbatch, stream and the trigger the pass recorded.

#include <string>

#include "metron/ir/graph.h"

namespace metron::cli {

std::string collective_listing(const ir::Graph& graph);

}  // namespace metron::cli
