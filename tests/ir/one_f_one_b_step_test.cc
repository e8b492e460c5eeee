// The issue's hand-built step: two-stage 1F1B with 4 microbatches and two data-parallel
// replicas, p2p on their own streams, one gradient all-reduce bucket per stage. It validates,
// round-trips through the text and JSON forms, and swapping two receives deadlocks.

#include "support/one_f_one_b_step.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>

#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/ir/action_rows.h"
#include "metron/ir/deadlock.h"
#include "metron/ir/json_format.h"
#include "metron/ir/ordering.h"
#include "metron/ir/rows_graph.h"

namespace metron::ir {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;

// Written by hand from Megatron's 1F1B: stage 0 warms up with one forward (p - r - 1 = 1), then
// alternates F and B, then cools down with B3; the last stage alternates from the start. Each
// forward of stage 1 first receives its input, each backward of stage 0 first receives its
// gradient. `@peer` is needed because every stage has two owners (ranks s and s + 2).
constexpr const char* kExpectedText =
    "group dp0: 0 2\n"
    "group dp1: 1 3\n"
    "rank 0: 0F0 0SEND_F0@1 0F1 0SEND_F1@1 0RECV_B0@1 0B0 0F2 0SEND_F2@1 0RECV_B1@1 0B1 0F3 "
    "0SEND_F3@1 0RECV_B2@1 0B2 0RECV_B3@1 0B3 "
    "ALL_REDUCE[dp0#0,bytes=100663296,bucket=0,stage=0,stream=dp-grad] 0STEP\n"
    "rank 1: 1RECV_F0@0 1F0 1B0 1SEND_B0@0 1RECV_F1@0 1F1 1B1 1SEND_B1@0 1RECV_F2@0 1F2 1B2 "
    "1SEND_B2@0 1RECV_F3@0 1F3 1B3 1SEND_B3@0 "
    "ALL_REDUCE[dp1#0,bytes=100663296,bucket=0,stage=1,stream=dp-grad] 1STEP\n"
    "rank 2: 0F0 0SEND_F0@3 0F1 0SEND_F1@3 0RECV_B0@3 0B0 0F2 0SEND_F2@3 0RECV_B1@3 0B1 0F3 "
    "0SEND_F3@3 0RECV_B2@3 0B2 0RECV_B3@3 0B3 "
    "ALL_REDUCE[dp0#0,bytes=100663296,bucket=0,stage=0,stream=dp-grad] 0STEP\n"
    "rank 3: 1RECV_F0@2 1F0 1B0 1SEND_B0@2 1RECV_F1@2 1F1 1B1 1SEND_B1@2 1RECV_F2@2 1F2 1B2 "
    "1SEND_B2@2 1RECV_F3@2 1F3 1B3 1SEND_B3@2 "
    "ALL_REDUCE[dp1#0,bytes=100663296,bucket=0,stage=1,stream=dp-grad] 1STEP\n";

const std::string kExampleDir = std::string(METRON_SOURCE_DIR) + "/examples/";

Graph step() { return testing::build_one_f_one_b_step({}); }

/// Unit-time dry run recording the step at which each task starts (host waits: none here).
std::vector<std::int32_t> start_steps(const Graph& g) {
  OrderingState state(g);
  std::vector<std::int32_t> starts(static_cast<std::size_t>(g.num_tasks()), -1);
  std::vector<TaskId> unit, running;
  for (std::int32_t now = 0;; ++now) {
    while (state.pop_startable(unit)) {
      for (TaskId t : unit) {
        state.start(t);
        running.push_back(t);
        starts[t.index()] = now;
      }
    }
    if (running.empty()) break;
    for (TaskId t : running) state.complete(t);
    running.clear();
  }
  return starts;
}

/// The one task of `rank` of the given kind (and compute phase and microbatch, when given).
TaskId find_task(const Graph& g, std::int32_t rank, TaskKind kind,
                 std::optional<Phase> phase = std::nullopt, std::int32_t microbatch = -1) {
  TaskId found;
  for (TaskId t : g.issue_order(RankId{rank})) {
    const Task& task = g.task(t);
    if (task.kind() != kind || task.microbatch.value() != microbatch) continue;
    if (phase && std::get<Compute>(task.op).phase != *phase) continue;
    EXPECT_FALSE(found.valid()) << "two tasks match on rank " << rank;
    found = t;
  }
  EXPECT_TRUE(found.valid()) << "no matching task on rank " << rank;
  return found;
}

/// Compares with a file under examples/, or rewrites it when METRON_UPDATE_GOLDEN=1.
void expect_golden(const std::string& name, const std::string& actual) {
  const std::string path = kExampleDir + name;
  if (const char* update = std::getenv("METRON_UPDATE_GOLDEN");
      update && std::string(update) == "1") {
    write_file_atomically(path, actual);
  }
  EXPECT_EQ(read_file(path), actual)
      << "golden file " << path << " differs; review, then regenerate with METRON_UPDATE_GOLDEN=1";
}

TEST(OneFOneBStep, ValidatesAndPrintsTheHandDerivedRows) {
  const Graph g = step();
  EXPECT_EQ(g.num_ranks(), 4);
  EXPECT_EQ(format_rows(graph_to_rows(g)), kExpectedText);
}

TEST(OneFOneBStep, P2PRunsOnItsOwnStreamsAndTheBucketOnTheGradientStream) {
  const Graph g = step();
  for (const Task& t : g.tasks()) {
    const std::string& stream = g.stream(t.stream).name;
    switch (t.kind()) {
      case TaskKind::kSend:
        EXPECT_EQ(stream, "pp-send");
        break;
      case TaskKind::kRecv:
        EXPECT_EQ(stream, "pp-recv");
        break;
      case TaskKind::kCollective:
        EXPECT_EQ(stream, "dp-grad");
        break;
      default:
        EXPECT_EQ(stream, "compute");
    }
  }
}

TEST(OneFOneBStep, RoundTripsThroughJsonExactly) {
  const Graph g = step();
  const std::string json = to_json(g);
  EXPECT_EQ(graph_from_json(json, "step.json"), g);
  expect_golden("1f1b-2stage-dp2.json", json);
}

TEST(OneFOneBStep, RoundTripsThroughTheTextForm) {
  // Text -> rows -> text is the identity, and the graph rebuilt from the text has the same rows.
  const ActionRows rows = parse_rows(kExpectedText, "expected");
  EXPECT_EQ(format_rows(rows), kExpectedText);
  const Graph rebuilt = rows_to_graph(rows);
  EXPECT_EQ(format_rows(graph_to_rows(rebuilt)), kExpectedText);
  EXPECT_FALSE(find_deadlock(rebuilt).deadlocked);
  expect_golden("1f1b-2stage-dp2.txt", kExpectedText);
}

TEST(OneFOneBStep, DryRunFinishesInTheHandDerivedNumberOfSteps) {
  // Stage 0: F0@0, F1@1 while SEND_F0 runs@1; stage 1: F0@2 B0@3, SEND_B0@4, F1@4 B1@5 ...
  // B3@11 on stage 1, SEND_B3@12 with stage 1's all-reduce@12, stage 0's B3@13, its all-reduce@14
  // and its optimizer step@15: sixteen unit steps.
  const DeadlockReport report = find_deadlock(step());
  EXPECT_FALSE(report.deadlocked);
  EXPECT_EQ(report.steps, 16);
  EXPECT_EQ(report.completed, step().num_tasks());
}

TEST(OneFOneBStep, LastStageBucketIsReducedWhileTheFirstStageStillRunsItsLastBackwards) {
  const Graph g = step();
  const auto starts = start_steps(g);
  const TaskId stage1_reduce = find_task(g, 1, TaskKind::kCollective);
  const TaskId stage0_last_backward = find_task(g, 0, TaskKind::kCompute, Phase::kBackward, 3);
  EXPECT_EQ(starts[stage1_reduce.index()], 12);
  EXPECT_EQ(starts[stage0_last_backward.index()], 13);
  // The replica's all-reduce member on rank 3 starts in the same step (rendezvous).
  EXPECT_EQ(starts[find_task(g, 3, TaskKind::kCollective).index()], 12);
}

TEST(OneFOneBStep, SwappedGradientReceivesValidateButDeadlock) {
  const Graph g = testing::build_one_f_one_b_step({.swap_first_gradient_receives = true});
  const DeadlockReport report = find_deadlock(g);
  ASSERT_TRUE(report.deadlocked);
  // Rank 0 now waits on pp-recv for microbatch 1's gradient, which rank 1 sends only after
  // microbatch 0's, and that send waits for the receive queued behind.
  EXPECT_THAT(
      report.blocked,
      Contains(AllOf(
          HasSubstr("rank 0 stream \"pp-recv\": task 4 (rank 0, stage 0, microbatch 1): receive of "
                    "gradient"),
          HasSubstr("is ready but waits for its partners"),
          HasSubstr("(rank 1, stage 1, microbatch 1): send"),
          HasSubstr("which is queued behind"))));
  EXPECT_THAT(report.blocked,
              Contains(AllOf(HasSubstr("rank 1 stream \"pp-send\""),
                             HasSubstr("(rank 1, stage 1, microbatch 0): send of "
                                       "gradient"),
                             HasSubstr("(rank 0, stage 0, microbatch 0): receive of gradient"))));
  EXPECT_THAT([&] { check_deadlock(g); },
              ::testing::ThrowsMessage<Deadlock>(HasSubstr("deadlock: no task can make progress")));
  // The text form shows the swap, and the graph rebuilt from it deadlocks the same way.
  const std::string text = format_rows(graph_to_rows(g));
  EXPECT_THAT(text, HasSubstr("rank 0: 0F0 0SEND_F0@1 0F1 0SEND_F1@1 0RECV_B1@1 0RECV_B0@1 0B0 "));
  EXPECT_TRUE(find_deadlock(rows_to_graph(parse_rows(text))).deadlocked);
}

}  // namespace
}  // namespace metron::ir
