// The plan's outputs (plan_report.h) from results built by hand: every number the CSV and JSON
// hold is the input's, the table shows the inputs rounded, in rank order, and the explanation
// names every dropped family. Then a real (tiny) plan: table, CSV and JSON agree.

#include "metron/plan/plan_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "metron/models/hardware_presets.h"
#include "metron/models/model_presets.h"
#include "metron/plan/planner.h"

namespace metron::plan {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, separator)) parts.push_back(part);
  if (!text.empty() && text.back() == separator) parts.emplace_back();
  return parts;
}

/// CSV rows (none of our test values needs quoting) as header name → cell.
std::vector<std::map<std::string, std::string>> read_csv(const std::string& csv) {
  const std::vector<std::string> lines = split(csv, '\n');
  EXPECT_FALSE(lines.empty());
  const std::vector<std::string> header = split(lines.front(), ',');
  std::vector<std::map<std::string, std::string>> rows;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    const std::vector<std::string> cells = split(lines[i], ',');
    EXPECT_EQ(cells.size(), header.size()) << "row " << i << ": " << lines[i];
    std::map<std::string, std::string> row;
    for (std::size_t c = 0; c < header.size() && c < cells.size(); ++c) row[header[c]] = cells[c];
    rows.push_back(std::move(row));
  }
  return rows;
}

PlanRequest small_request() {
  PlanRequest request;
  request.model = models::model_preset("gpt3-1.3b");
  request.hardware = models::hardware_preset("dgx-a100");
  request.gpus = 16;
  request.global_batch = 64;
  request.seq_len = 1024;
  request.top_k = 3;
  return request;
}

Candidate candidate(std::int64_t tp, std::int64_t pp, std::int64_t dp, std::int64_t vp,
                    std::string_view schedule) {
  Candidate c;
  c.parallel = {.tp = tp,
                .pp = pp,
                .dp = dp,
                .vp = vp,
                .sequence_parallel = tp > 1,
                .microbatch_size = 2,
                .global_batch = 64,
                .seq_len = 1024};
  c.schedule = schedule;
  return c;
}

/// A ranked configuration with the scenario a planner would give it (by hand, not to_scenario).
PlannedConfig planned(const PlanRequest& request, const Candidate& c) {
  PlannedConfig config;
  config.candidate = c;
  config.scenario.model = request.model;
  config.scenario.hardware = request.hardware;
  config.scenario.gpus = c.parallel.gpus();
  config.scenario.parallel = c.parallel;
  config.scenario.schedule.name = std::string(c.schedule);
  config.scenario.schedule.group_size = c.group_size;
  config.scenario.sync.policy = c.policy;
  config.scenario.sync.bucket_size = c.bucket_size;
  config.gpus = c.parallel.gpus();
  config.memory_capacity_bytes = 80e9;
  return config;
}

/// Two ranked configurations, three kinds of drops (one with more families than explain lists).
PlanResult hand_result(const PlanRequest& request) {
  PlanResult result;
  Candidate fused = candidate(2, 2, 4, 1, "1f1b");
  fused.parallel.attention = models::AttentionKernel::kFused;
  fused.parallel.tp_comm_overlap = true;
  fused.parallel.account_for_loss_in_pipeline_split = true;
  PlannedConfig first = planned(request, fused);
  first.tokens_per_s = 123456.78;
  first.iteration_time_s = 0.53125;
  first.mfu = 0.4567;
  first.bubble_fraction = 0.125;
  first.exposed_comm_fraction = 0.071;
  first.peak_memory_bytes = 61.23e9;
  first.bound_s = 0.5;
  Candidate c = candidate(1, 4, 4, 2, "interleaved-1f1b");
  c.group_size = 8;
  c.bucket_size = 40'000'000;
  c.policy = sync::SyncPolicy::kDdp;
  c.parallel.recompute = models::Recompute::kSelective;
  c.parallel.fp8 = models::Fp8Recipe::kCurrent;
  // An uneven split of GPT-3 1.3B's 24 layers over 4 ranks of 2 chunks: 4 + 8 + 8 + 4.
  c.parallel.first_stage_layers = 4;
  c.parallel.last_stage_layers = 4;
  PlannedConfig second = planned(request, c);
  second.tokens_per_s = 98765.4321;
  second.iteration_time_s = 0.6635;
  second.mfu = 0.3702;
  second.bubble_fraction = 0.2049;
  second.exposed_comm_fraction = 0.0013;
  second.peak_memory_bytes = 70.04e9;
  second.bound_s = 0.61;
  result.ranked = {first, second};
  for (int tp = 3; tp < 25; ++tp) {  // 22 families: explain lists 20
    result.dropped.push_back({DropReason::kTensorParallel, "tp=" + std::to_string(tp),
                              "heads (16) not divisible by tp (" + std::to_string(tp) + ")", 0});
  }
  result.dropped.push_back({DropReason::kSchedule, "tp=1 pp=4 interleaved-1f1b vp=3",
                            "layers (24) not divisible by pp·vp = 12", 3});
  result.dropped.push_back(
      {DropReason::kMemory, "tp=1 pp=1 1f1b vp=1", "peak 91.0 GB above 72.0 GB usable", 12});
  result.stats.enumerated = 100;
  result.stats.dropped[static_cast<std::size_t>(DropReason::kSchedule)] = 3;
  result.stats.dropped[static_cast<std::size_t>(DropReason::kMemory)] = 12;
  result.stats.bounded = 85;
  result.stats.simulated = 10;
  result.stats.pruned = 75;
  result.stats.threads = 2;
  result.stats.seconds = 0.834;
  result.stats.phases = {
      .enumerate_s = 0.012, .estimate_s = 0.25, .build_s = 1.004, .simulate_s = 0.125};
  return result;
}

constexpr std::size_t kColumns = 31;  // Note [plan report fields]

TEST(PlanReport, CsvHoldsEveryInputAtFullPrecision) {
  const PlanRequest request = small_request();
  const PlanResult result = hand_result(request);
  const std::string csv = plan_csv(result);
  EXPECT_THAT(csv, StartsWith("rank,tokens_per_s,iteration_time_ms,mfu,bubble_fraction,"
                              "exposed_comm_fraction,peak_memory_bytes,memory_capacity_bytes,gpus,"
                              "tp,pp,dp,vp,first_stage_layers,last_stage_layers,"
                              "account_for_embedding_in_pipeline_split,"
                              "account_for_loss_in_pipeline_split,cp,ep,"
                              "sequence_parallel,microbatch_size,"
                              "num_microbatches,recompute,attention,fp8,tp_comm_overlap,"
                              "schedule,group_size,policy,bucket_size,bound_ms\n"));
  const auto rows = read_csv(csv);
  ASSERT_EQ(rows.size(), 2U);
  for (const auto& row : rows) EXPECT_EQ(row.size(), kColumns);
  const auto& a = rows[0];
  EXPECT_EQ(a.at("rank"), "1");
  EXPECT_EQ(std::stod(a.at("tokens_per_s")), 123456.78);
  EXPECT_EQ(std::stod(a.at("iteration_time_ms")), 0.53125 * 1e3);
  EXPECT_EQ(std::stod(a.at("mfu")), 0.4567);
  EXPECT_EQ(std::stod(a.at("bubble_fraction")), 0.125);
  EXPECT_EQ(std::stod(a.at("exposed_comm_fraction")), 0.071);
  EXPECT_EQ(std::stod(a.at("peak_memory_bytes")), 61.23e9);
  EXPECT_EQ(std::stod(a.at("memory_capacity_bytes")), 80e9);
  EXPECT_EQ(std::stod(a.at("bound_ms")), 0.5 * 1e3);
  EXPECT_EQ(a.at("gpus"), "16");  // 2·2·4
  EXPECT_EQ(a.at("tp") + a.at("pp") + a.at("dp") + a.at("vp") + a.at("cp") + a.at("ep"), "224111");
  EXPECT_EQ(a.at("first_stage_layers") + a.at("last_stage_layers"), "");  // an even split
  EXPECT_EQ(a.at("account_for_embedding_in_pipeline_split") + "," +
                a.at("account_for_loss_in_pipeline_split"),
            "false,true");
  EXPECT_EQ(a.at("sequence_parallel"), "true");
  EXPECT_EQ(a.at("microbatch_size"), "2");
  EXPECT_EQ(a.at("num_microbatches"), "8");  // 64 / (2 · 4)
  EXPECT_EQ(a.at("recompute"), "none");
  EXPECT_EQ(a.at("attention") + " " + a.at("fp8") + " " + a.at("tp_comm_overlap"),
            "fused off true");
  EXPECT_EQ(a.at("schedule"), "1f1b");
  EXPECT_EQ(a.at("group_size"), "");  // the schedule's default
  EXPECT_EQ(a.at("policy"), "megatron-distopt");
  EXPECT_EQ(a.at("bucket_size"), "");
  const auto& b = rows[1];
  EXPECT_EQ(b.at("rank"), "2");
  EXPECT_EQ(std::stod(b.at("tokens_per_s")), 98765.4321);
  EXPECT_EQ(std::stod(b.at("iteration_time_ms")), 0.6635 * 1e3);
  EXPECT_EQ(b.at("sequence_parallel"), "false");
  EXPECT_EQ(b.at("vp"), "2");
  EXPECT_EQ(b.at("first_stage_layers") + "," + b.at("last_stage_layers"), "4,4");
  EXPECT_EQ(b.at("recompute"), "selective");
  EXPECT_EQ(b.at("attention") + " " + b.at("fp8") + " " + b.at("tp_comm_overlap"),
            "unfused current false");
  EXPECT_EQ(b.at("schedule"), "interleaved-1f1b");
  EXPECT_EQ(b.at("group_size"), "8");
  EXPECT_EQ(b.at("policy"), "ddp");
  EXPECT_EQ(b.at("bucket_size"), "40000000");
}

TEST(PlanReport, JsonHoldsTheRequestRankingDropsAndStats) {
  const PlanRequest request = small_request();
  const PlanResult result = hand_result(request);
  const nlohmann::json json = nlohmann::json::parse(plan_json(request, result));
  const nlohmann::json& r = json.at("request");
  EXPECT_EQ(r.at("model"), "gpt3-1.3b");
  EXPECT_EQ(r.at("hardware"), "dgx-a100");
  EXPECT_EQ(r.at("gpus"), 16);
  EXPECT_EQ(r.at("global_batch"), 64);
  EXPECT_EQ(r.at("seq_len"), 1024);
  EXPECT_EQ(r.at("memory_headroom").get<double>(), 0.1);
  EXPECT_EQ(r.at("top_k"), 3);

  const nlohmann::json& ranked = json.at("ranked");
  ASSERT_EQ(ranked.size(), 2U);
  EXPECT_EQ(ranked[0].size(), kColumns + 2);  // + configuration, scenario
  EXPECT_EQ(ranked[0].at("rank"), 1);
  EXPECT_EQ(ranked[0].at("tokens_per_s").get<double>(), 123456.78);
  EXPECT_EQ(ranked[0].at("iteration_time_ms").get<double>(), 531.25);
  EXPECT_EQ(ranked[0].at("peak_memory_bytes").get<double>(), 61.23e9);
  EXPECT_EQ(ranked[0].at("sequence_parallel"), true);
  EXPECT_TRUE(ranked[0].at("group_size").is_null());
  EXPECT_TRUE(ranked[0].at("bucket_size").is_null());
  EXPECT_EQ(ranked[0].at("scenario"), nlohmann::json::parse(to_json(result.ranked[0].scenario)));
  EXPECT_EQ(ranked[0].at("configuration"),
            "tp2 pp2 dp4 vp1 mbs2 account=loss sp 1f1b megatron-distopt attention=fused "
            "tpoverlap");
  EXPECT_EQ(ranked[0].at("account_for_loss_in_pipeline_split"), true);
  EXPECT_EQ(ranked[0].at("account_for_embedding_in_pipeline_split"), false);
  EXPECT_EQ(ranked[0].at("attention"), "fused");
  EXPECT_EQ(ranked[0].at("tp_comm_overlap"), true);
  EXPECT_EQ(ranked[1].at("fp8"), "current");
  EXPECT_EQ(ranked[1].at("scenario").at("parallel").at("fp8"), "current");
  EXPECT_EQ(ranked[1].at("mfu").get<double>(), 0.3702);
  EXPECT_EQ(ranked[1].at("group_size"), 8);
  EXPECT_EQ(ranked[1].at("bucket_size"), 40'000'000);
  EXPECT_EQ(ranked[1].at("recompute"), "selective");
  EXPECT_EQ(ranked[1].at("scenario").at("parallel").at("vp"), 2);
  EXPECT_EQ(ranked[1].at("first_stage_layers"), 4);
  EXPECT_EQ(ranked[1].at("scenario").at("parallel").at("last_stage_layers"), 4);
  EXPECT_TRUE(ranked[0].at("first_stage_layers").is_null());

  const nlohmann::json& dropped = json.at("dropped");
  ASSERT_EQ(dropped.size(), result.dropped.size());
  EXPECT_EQ(dropped[0].at("reason"), "tensor-parallel");
  EXPECT_EQ(dropped[0].at("family"), "tp=3");
  EXPECT_EQ(dropped.back().at("reason"), "memory");
  EXPECT_EQ(dropped.back().at("detail"), "peak 91.0 GB above 72.0 GB usable");
  EXPECT_EQ(dropped.back().at("configurations"), 12);

  const nlohmann::json& stats = json.at("stats");
  EXPECT_EQ(stats.at("enumerated"), 100);
  EXPECT_EQ(stats.at("bounded"), 85);
  // Issue 14: what varies with threads and time is apart, in "run" (Note [plan run statistics]).
  EXPECT_FALSE(stats.contains("simulated"));
  EXPECT_FALSE(stats.contains("seconds"));
  const nlohmann::json& run = json.at("run");
  EXPECT_EQ(run.at("simulated"), 10);
  EXPECT_EQ(run.at("pruned"), 75);
  EXPECT_EQ(run.at("threads"), 2);
  EXPECT_EQ(run.at("seconds").get<double>(), 0.834);
  EXPECT_EQ(run.at("phases").at("enumerate_s").get<double>(), 0.012);
  EXPECT_EQ(run.at("phases").at("estimate_s").get<double>(), 0.25);
  EXPECT_EQ(run.at("phases").at("build_thread_s").get<double>(), 1.004);
  EXPECT_EQ(run.at("phases").at("simulate_thread_s").get<double>(), 0.125);
  EXPECT_EQ(stats.at("dropped_by_reason").size(), kDropReasons);
  EXPECT_EQ(stats.at("dropped_by_reason").at("memory"), 12);
  EXPECT_EQ(stats.at("dropped_by_reason").at("schedule"), 3);
  EXPECT_EQ(stats.at("dropped_by_reason").at("layers"), 0);
}

TEST(PlanReport, TableShowsTheRankingRoundedAndInOrder) {
  const PlanRequest request = small_request();
  const PlanResult result = hand_result(request);
  const std::string table = ranked_table(request, result);
  EXPECT_THAT(table, StartsWith("gpt3-1.3b on dgx-a100, up to 16 GPUs, global batch 64, sequence "
                                "1,024: the 2 best configurations by tokens/s\n"));
  const std::vector<std::string> lines = split(table, '\n');
  ASSERT_GE(lines.size(), 4U);
  EXPECT_THAT(lines[1], StartsWith("rank"));
  // 123456.78 → 123,457; 531.25 ms; 45.67% → 45.7; 12.5%; 7.1%; 61.23 GB of 80.
  for (const char* cell : {"123,457", "531.25", "45.7%", "12.5%", "7.1%", "61.2/80.0", "16"}) {
    EXPECT_THAT(lines[2], HasSubstr(cell));
  }
  EXPECT_THAT(lines[2], HasSubstr(describe(result.ranked[0].candidate)));
  EXPECT_THAT(lines[2], StartsWith("   1"));
  // 98765.43 → 98,765; 663.50 ms; 37.0%; 20.49% → 20.5; 0.13% → 0.1%; 70.04 GB.
  for (const char* cell : {"98,765", "663.50", "37.0%", "20.5%", "0.1%", "70.0/80.0"}) {
    EXPECT_THAT(lines[3], HasSubstr(cell));
  }
  EXPECT_THAT(lines[3], HasSubstr(describe(result.ranked[1].candidate)));
  EXPECT_THAT(lines[3], StartsWith("   2"));
  // Aligned: every row as long as the others up to the configuration column.
  EXPECT_EQ(lines[2].find(describe(result.ranked[0].candidate)),
            lines[3].find(describe(result.ranked[1].candidate)));
}

// Note [compared configuration]: the hand ranking's two (0.53125 s and 0.6635 s) beat a
// configuration of 0.85 s by 1 − 0.53125 / 0.85 = 37.5 % and 1 − 0.6635 / 0.85 = 21.9 %.
TEST(PlanReport, ComparisonSaysWhereANamedConfigurationRanksAndWhatBeatsIt) {
  const PlanRequest request = small_request();
  const PlanResult result = hand_result(request);
  ComparedConfig compared{.config = planned(request, candidate(2, 4, 2, 1, "1f1b")), .rank = 3U};
  compared.config.iteration_time_s = 0.85;
  compared.config.tokens_per_s = 77101.2;
  compared.config.mfu = 0.25;
  compared.config.bubble_fraction = 0.3;
  compared.config.exposed_comm_fraction = 0.05;
  compared.config.peak_memory_bytes = 33.3e9;
  const std::string text = comparison_text(result, compared);
  EXPECT_THAT(text, StartsWith("compared with tp2 pp4 dp2 vp1 mbs2 sp 1f1b megatron-distopt (16 "
                               "GPUs):\n"
                               "  predicted 850.00 ms per iteration, 77,101 tokens/s, MFU 25.0%, "
                               "bubble 30.0%, exposed comm 5.0%, memory 33.3/80.0 GB\n"
                               "  it ranks #3; 2 configurations beat it:\n"));
  // What each does differently: its own fields that the compared one lacks, the kernel
  // options included.
  EXPECT_THAT(text, HasSubstr("    #1 37.5% faster: pp2 dp4 account=loss attention=fused "
                              "tpoverlap; bubble 12.5% (30.0%), exposed comm 7.1% (5.0%), memory "
                              "61.2 GB (33.3)\n"));
  EXPECT_THAT(text, HasSubstr("    #2 21.9% faster: tp1 dp4 vp2 first4 last4 interleaved-1f1b N=8 "
                              "ddp bucket=40000000 recompute=selective fp8=current; "));
  // Slower than a full ranking: no place, every ranked one beats it.
  compared.rank.reset();
  EXPECT_THAT(comparison_text(result, compared),
              HasSubstr("it ranks below all 2 ranked; they beat"));
  // One that cannot run says why, and nothing else.
  compared.problem = "simulated peak 90.0 GB on pipeline rank 0 > 72.0 GB usable";
  EXPECT_THAT(comparison_text(result, compared),
              EndsWith("  it cannot run: simulated peak 90.0 GB on pipeline rank 0 > 72.0 GB "
                       "usable\n"));
  // The JSON carries it with the ranking's fields, its rank (null: none) and the problem.
  const nlohmann::json json = nlohmann::json::parse(plan_json(request, result, &compared));
  EXPECT_TRUE(json.at("compared").at("rank").is_null());
  EXPECT_EQ(json.at("compared").at("configuration"),
            "tp2 pp4 dp2 vp1 mbs2 sp 1f1b megatron-distopt");
  EXPECT_EQ(json.at("compared").at("iteration_time_ms"), 850.0);
  EXPECT_EQ(json.at("compared").at("problem"), compared.problem);
  EXPECT_FALSE(nlohmann::json::parse(plan_json(request, result)).contains("compared"));
}

TEST(PlanReport, TableSaysWhenNothingFits) {
  const PlanRequest request = small_request();
  PlanResult result = hand_result(request);
  result.ranked.clear();
  EXPECT_THAT(ranked_table(request, result),
              HasSubstr("no configuration fits (100 configurations enumerated)"));
  EXPECT_EQ(read_csv(plan_csv(result)).size(), 0U);
}

TEST(PlanReport, ExplainListsEveryFamilyUpToTwentyPerReason) {
  const PlanRequest request = small_request();
  const PlanResult result = hand_result(request);
  const std::string text = explain_text(result);
  EXPECT_THAT(text, HasSubstr("tensor-parallel: 22 families, rejected before enumeration\n"));
  for (int tp = 3; tp < 23; ++tp) {
    EXPECT_THAT(text, HasSubstr("    tp=" + std::to_string(tp) +
                                ": heads (16) not divisible by tp (" + std::to_string(tp) + ")\n"));
  }
  EXPECT_THAT(text, Not(HasSubstr("tp=23:")));
  EXPECT_THAT(text, HasSubstr("    ... and 2 more\n"));
  EXPECT_THAT(text, HasSubstr("schedule: 3 configurations dropped, 1 family\n"
                              "    tp=1 pp=4 interleaved-1f1b vp=3: layers (24) not divisible by "
                              "pp·vp = 12 (3 configurations)\n"));
  EXPECT_THAT(text, HasSubstr("memory: 12 configurations dropped, 1 family\n"
                              "    tp=1 pp=1 1f1b vp=1: peak 91.0 GB above 72.0 GB usable "
                              "(12 configurations)\n"));
  EXPECT_THAT(text, HasSubstr("Pruned: 75 configurations not simulated"));
  // Reasons come in the enum's order: tensor-parallel, ..., schedule, ..., memory.
  EXPECT_LT(text.find("tensor-parallel:"), text.find("schedule:"));
  EXPECT_LT(text.find("schedule:"), text.find("memory:"));
}

TEST(PlanReport, StatsLineSumsTheDropsByReason) {
  const PlanResult result = hand_result(small_request());
  // 3 (schedule) + 12 (memory) = 15 dropped, in enum order.
  EXPECT_EQ(stats_line(result),
            "enumerated 100 configurations, dropped 15 (schedule 3, memory 12), bounded 85, "
            "simulated 10, pruned 75, in 0.83 s on 2 threads\n");
  EXPECT_EQ(phases_line(result),
            "time: enumerating 0.01 s, estimating 0.25 s, building steps 1.00 s and simulating "
            "0.12 s (thread time)\n");
}

/// A plan small enough for a unit test: gpt3-1.3b on 16 A100s, tp and pp in {1, 2}, 1F1B only.
PlanRequest tiny_plan_request() {
  PlanRequest request = small_request();
  request.space.tp = {1, 2};
  request.space.pp = {1, 2};
  request.space.schedules = {"1f1b"};
  request.space.recompute = {models::Recompute::kNone};
  request.space.microbatch_size = {1, 2};
  return request;
}

TEST(PlanReport, TableCsvAndJsonOfARealPlanAgree) {
  const PlanRequest request = tiny_plan_request();
  const PlanResult result = run_plan(request, {.threads = 2});
  ASSERT_FALSE(result.ranked.empty());
  ASSERT_LE(result.ranked.size(), 3U);
  const auto rows = read_csv(plan_csv(result));
  const nlohmann::json json = nlohmann::json::parse(plan_json(request, result));
  const std::vector<std::string> table = split(ranked_table(request, result), '\n');
  ASSERT_EQ(rows.size(), result.ranked.size());
  ASSERT_EQ(json.at("ranked").size(), result.ranked.size());
  for (std::size_t i = 0; i < result.ranked.size(); ++i) {
    const nlohmann::json& entry = json.at("ranked").at(i);
    const auto& row = rows[i];
    for (const char* key : {"rank", "tp", "pp", "dp", "vp", "microbatch_size", "gpus"}) {
      EXPECT_EQ(row.at(key), std::to_string(entry.at(key).get<std::int64_t>())) << key;
    }
    EXPECT_EQ(row.at("schedule"), entry.at("schedule").get<std::string>());
    EXPECT_EQ(row.at("policy"), entry.at("policy").get<std::string>());
    const double tokens = std::stod(row.at("tokens_per_s"));
    EXPECT_EQ(tokens, entry.at("tokens_per_s").get<double>());
    // The table's row i + 2 (after the title and the header) is rank i + 1.
    const std::string& line = table.at(i + 2);
    EXPECT_THAT(line, StartsWith(std::string(4 - std::to_string(i + 1).size(), ' ') +
                                 std::to_string(i + 1) + "  "));
    EXPECT_THAT(line, HasSubstr(describe(result.ranked[i].candidate)));
    std::string digits = std::to_string(std::llround(tokens));
    for (auto at = static_cast<std::ptrdiff_t>(digits.size()) - 3; at > 0; at -= 3) {
      digits.insert(static_cast<std::size_t>(at), ",");
    }
    EXPECT_THAT(line, HasSubstr(" " + digits + " "));
    // The JSON's scenario is the configuration's.
    const nlohmann::json& parallel = entry.at("scenario").at("parallel");
    EXPECT_EQ(parallel.at("tp"), entry.at("tp"));
    EXPECT_EQ(parallel.at("pp"), entry.at("pp"));
    EXPECT_EQ(parallel.at("dp"), entry.at("dp"));
    if (i > 0) {
      EXPECT_GE(result.ranked[i - 1].tokens_per_s, result.ranked[i].tokens_per_s);
    }
  }
}

}  // namespace
}  // namespace metron::plan
