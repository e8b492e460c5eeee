// Uses metron's installed headers and libraries: builds a matched send/recv between two ranks,
// then checks that an unmatched send is rejected with metron::InvalidGraph, and lowers a 1F1B
// order through two of the schedules module's libraries (pipeline, lowering). Returns 0 on
// success.

#include <cstdio>
#include <utility>

#include "metron/base/error.h"
#include "metron/ir/graph.h"
#include "metron/ir/graph_builder.h"
#include "metron/lowering/lowering.h"
#include "metron/pipeline/registry.h"

namespace {

namespace ir = metron::ir;

// Two ranks, one stream each; rank 0 sends `bytes` with `tag`, and rank 1 receives them when
// `with_recv` is set.
ir::GraphBuilder two_ranks(bool with_recv) {
  ir::GraphBuilder b;
  const ir::RankId r0 = b.add_rank();
  const ir::RankId r1 = b.add_rank();
  const ir::StreamId s0 = b.add_stream(r0, "pp-send");
  const ir::StreamId s1 = b.add_stream(r1, "pp-recv");
  b.add({.rank = r0, .stream = s0, .op = ir::Send{.peer = r1, .bytes = 1024, .tag = 7}});
  if (with_recv) {
    b.add({.rank = r1, .stream = s1, .op = ir::Recv{.peer = r0, .bytes = 1024, .tag = 7}});
  }
  return b;
}

}  // namespace

int main() {
  try {
    const ir::Graph g = two_ranks(true).build();
    if (g.num_ranks() != 2 || g.num_tasks() != 2) {
      std::fprintf(stderr, "consumer: expected 2 ranks and 2 tasks, got %d and %d\n", g.num_ranks(),
                   g.num_tasks());
      return 1;
    }
  } catch (const metron::Error& e) {
    std::fprintf(stderr, "consumer: a matched send/recv was rejected: %s\n", e.what());
    return 1;
  }

  try {
    static_cast<void>(two_ranks(false).build());
    std::fprintf(stderr, "consumer: an unmatched send was accepted\n");
    return 1;
  } catch (const metron::InvalidGraph& e) {
    std::printf("consumer: unmatched send rejected as expected:\n%s\n", e.what());
  }
  // 1F1B over 2 ranks and 2 microbatches: per rank 2 F, 2 B and a STEP; per microbatch one
  // activation and one gradient crossing the boundary, each a send and a receive: 10 + 8 tasks.
  const ir::Graph lowered = metron::lowering::lower(
      metron::pipeline::generate_order({.name = "1f1b", .pp = 2, .microbatches = 2}), {});
  if (lowered.num_ranks() != 2 || lowered.num_tasks() != 18) {
    std::fprintf(stderr,
                 "consumer: expected a lowered 1F1B of 2 ranks and 18 tasks, got %d and %d\n",
                 lowered.num_ranks(), lowered.num_tasks());
    return 1;
  }
  std::printf("consumer: ok\n");
  return 0;
}
