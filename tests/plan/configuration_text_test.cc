// A configuration named in words (plan/configuration_text.h, Note [configuration text]): the
// fields it names, the planner's choice for the rest, and a clear refusal of what is not a
// configuration.

#include "metron/plan/configuration_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "metron/base/error.h"
#include "metron/models/hardware_presets.h"
#include "metron/models/model_presets.h"

namespace metron::plan {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

PlanRequest request(std::string_view model, std::int64_t gpus, std::int64_t global_batch,
                    std::int64_t seq) {
  PlanRequest r;
  r.model = models::model_preset(model);
  r.hardware = models::hardware_preset("dgx-h100");
  r.gpus = gpus;
  r.global_batch = global_batch;
  r.seq_len = seq;
  return r;
}

std::string refusal(const PlanRequest& r, std::string_view text) {
  try {
    static_cast<void>(parse_configuration(r, text));
  } catch (const InvalidConfig& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigurationText, ReadsEveryFieldInAnyOrder) {
  const PlanRequest r = request("gpt3-175b", 1024, 1536, 2048);
  const Candidate c = parse_configuration(
      r,
      "  zero1 recompute=selective N=8 interleaved-1f1b mbs2 vp=3 dp16 pp8 tp=8 sp "
      "bucket=40000000 ");
  EXPECT_EQ(c.parallel.tp, 8);
  EXPECT_EQ(c.parallel.pp, 8);
  EXPECT_EQ(c.parallel.dp, 16);
  EXPECT_EQ(c.parallel.vp, 3);
  EXPECT_EQ(c.parallel.microbatch_size, 2);
  EXPECT_TRUE(c.parallel.sequence_parallel);
  // Without sequence parallelism at tp > 1 describe() says so: the text's default there is on
  // (found by fuzzing: "pp8 tp4 nosp" read back with sequence parallelism).
  const Candidate nosp = parse_configuration(r, "tp8 pp8 nosp");
  EXPECT_FALSE(nosp.parallel.sequence_parallel);
  EXPECT_THAT(describe(nosp), HasSubstr(" nosp "));
  EXPECT_EQ(parse_configuration(r, describe(nosp)), nosp);
  EXPECT_THAT(describe(parse_configuration(r, "tp1 pp8")), Not(HasSubstr("sp")));
  // "sp" at tp 1 is off, as Megatron turns it off (found by fuzzing: it read back unset).
  EXPECT_FALSE(parse_configuration(r, "pp2 sp").parallel.sequence_parallel);
  EXPECT_EQ(c.parallel.recompute, models::Recompute::kSelective);
  EXPECT_EQ(c.schedule, "interleaved-1f1b");
  EXPECT_EQ(c.group_size, 8);
  EXPECT_EQ(c.policy, sync::SyncPolicy::kZero1);
  EXPECT_EQ(c.bucket_size, 40000000);
  EXPECT_EQ(c.parallel.global_batch, 1536);
  EXPECT_EQ(c.parallel.seq_len, 2048);
  // describe() reads back as the same configuration.
  EXPECT_EQ(parse_configuration(r, describe(c)), c);
}

TEST(ConfigurationText, LeavesTheRestToThePlannersChoices) {
  const PlanRequest r = request("gpt3-175b", 1024, 1536, 2048);
  const Candidate c = parse_configuration(r, "tp8 pp16");
  EXPECT_EQ(c.parallel.dp, 8);  // 1024 / (8 · 16)
  EXPECT_EQ(c.parallel.vp, 1);
  EXPECT_EQ(c.parallel.microbatch_size, 1);
  EXPECT_TRUE(c.parallel.sequence_parallel);  // tp > 1 and 8 divides 2048
  EXPECT_EQ(c.parallel.recompute, models::Recompute::kNone);
  EXPECT_EQ(c.schedule, "1f1b");
  EXPECT_EQ(c.policy, sync::SyncPolicy::kMegatronDistopt);
  EXPECT_EQ(c.parallel.first_stage_layers, std::nullopt);  // 96 layers divide over 16
  // Naming vp > 1 alone means the interleaved schedule; a V schedule brings its own 2 chunks.
  EXPECT_EQ(parse_configuration(r, "tp8 pp16 vp2").schedule, "interleaved-1f1b");
  EXPECT_EQ(parse_configuration(r, "tp8 pp16 zb-v").parallel.vp, 2);
  // "dualpipe-v" starts with neither a number field nor "dp" followed by digits.
  EXPECT_EQ(parse_configuration(r, "tp8 pp16 dualpipe-v").schedule, "dualpipe-v");
}

TEST(ConfigurationText, ReadsTheKernelOptionsAndTakesTheRequestsFirstOtherwise) {
  PlanRequest r = request("gpt3-175b", 1024, 1536, 2048);
  const Candidate c =
      parse_configuration(r, "tp8 pp16 attention=fused fp8=delayed tpoverlap interleaved-1f1b");
  EXPECT_EQ(c.parallel.attention, models::AttentionKernel::kFused);
  EXPECT_EQ(c.parallel.fp8, models::Fp8Recipe::kDelayed);
  EXPECT_TRUE(c.parallel.tp_comm_overlap);
  EXPECT_EQ(parse_configuration(r, describe(c)), c);
  // Not named: the scenario's defaults, or the request's first listed value.
  const Candidate plain = parse_configuration(r, "tp8 pp16");
  EXPECT_EQ(plain.parallel.attention, models::AttentionKernel::kUnfused);
  EXPECT_EQ(plain.parallel.fp8, models::Fp8Recipe::kOff);
  EXPECT_FALSE(plain.parallel.tp_comm_overlap);
  r.space.attention = {models::AttentionKernel::kFused, models::AttentionKernel::kUnfused};
  r.space.fp8 = {models::Fp8Recipe::kCurrent};
  r.space.tp_comm_overlap = {true};
  const Candidate listed = parse_configuration(r, "tp8 pp16");
  EXPECT_EQ(listed.parallel.attention, models::AttentionKernel::kFused);
  EXPECT_EQ(listed.parallel.fp8, models::Fp8Recipe::kCurrent);
  EXPECT_TRUE(listed.parallel.tp_comm_overlap);
  // The plan writes a configuration so that it reads back under its request: here the defaults
  // that describe() leaves out are not what the text would take.
  const Candidate defaults =
      parse_configuration(r, "tp8 pp16 attention=unfused fp8=off notpoverlap interleaved-1f1b");
  EXPECT_NE(parse_configuration(r, describe(defaults)), defaults);
  EXPECT_THAT(describe(r, defaults), AllOf(HasSubstr(" attention=unfused"), HasSubstr(" fp8=off"),
                                           HasSubstr(" notpoverlap")));
  EXPECT_EQ(parse_configuration(r, describe(r, defaults)), defaults);
  EXPECT_EQ(parse_configuration(r, describe(r, listed)), listed);
  EXPECT_EQ(describe(r, listed), describe(listed));  // its values are named already
  // The overlap needs sequence parallelism: without it the planner's choice is off, and naming
  // it is refused as the models refuse it.
  EXPECT_FALSE(parse_configuration(r, "tp8 pp16 nosp").parallel.tp_comm_overlap);
  EXPECT_THAT(refusal(r, "tp8 pp16 nosp tpoverlap"), HasSubstr("needs sequence_parallel"));
  EXPECT_THAT(refusal(r, "attention=flashy"), HasSubstr("expected attention=unfused|fused"));
  EXPECT_THAT(refusal(r, "fp8=e4m3"), HasSubstr("expected fp8=off|delayed|current"));
  EXPECT_THAT(refusal(r, "tpoverlap notpoverlap"), HasSubstr("names a field a second time"));
}

TEST(ConfigurationText, SplitsLayersAsTheSearchDoesWhereTheyDoNotDivide) {
  // Llama 3 405B's 126 layers on pp 16: 7, 8 × 14, 7, as Meta ran them.
  const PlanRequest r = request("llama3-405b", 16384, 2048, 8192);
  const Candidate c = parse_configuration(r, "tp8 pp16 dp128");
  EXPECT_EQ(c.parallel.first_stage_layers, 7);
  EXPECT_EQ(c.parallel.last_stage_layers, 7);
  // Named counts are kept as named.
  const Candidate named = parse_configuration(r, "tp8 pp16 dp128 first6 last8");
  EXPECT_EQ(named.parallel.first_stage_layers, 6);
  EXPECT_EQ(named.parallel.last_stage_layers, 8);
  // One named alone stays alone, written and read back so (found by fuzzing: "last4" was written
  // "first0 last4", a first stage of no layers).
  const Candidate last = parse_configuration(request("gpt3-175b", 1024, 1536, 2048), "pp2 last4");
  EXPECT_EQ(last.parallel.first_stage_layers, std::nullopt);
  EXPECT_THAT(describe(last), AllOf(HasSubstr(" last4"), Not(HasSubstr("first"))));
  EXPECT_EQ(parse_configuration(request("gpt3-175b", 1024, 1536, 2048), describe(last)), last);
  // Interleaved on 4 chunks: no whole-chunk edge counts, so the accounted split, which describe
  // writes and reads back.
  const Candidate interleaved = parse_configuration(r, "tp8 pp16 dp128 vp4");
  EXPECT_TRUE(interleaved.parallel.account_for_embedding_in_pipeline_split);
  EXPECT_TRUE(interleaved.parallel.account_for_loss_in_pipeline_split);
  EXPECT_THAT(describe(interleaved), HasSubstr(" account=embedding+loss"));
  EXPECT_EQ(parse_configuration(r, describe(interleaved)), interleaved);
  EXPECT_THAT(refusal(r, "tp8 pp16 dp128 vp4 account=both"),
              HasSubstr("expected account=embedding|loss|embedding+loss"));
  // Named alone, the loss: 126 + 1 does not divide over 64 virtual stages.
  EXPECT_THAT(refusal(r, "tp8 pp16 dp128 vp4 account=loss"), HasSubstr("127"));
}

TEST(ConfigurationText, RefusesWhatIsNotAConfigurationNamingIt) {
  const PlanRequest r = request("gpt3-175b", 1024, 1536, 2048);
  EXPECT_THAT(refusal(r, "tp8 pp16 colour=blue"),
              AllOf(HasSubstr("--compare-with 'tp8 pp16 colour=blue'"),
                    HasSubstr("'colour=blue' is not a configuration field"), HasSubstr("mbsN")));
  EXPECT_THAT(refusal(r, "tp8 tp4"), HasSubstr("'tp4' names a field a second time"));
  EXPECT_THAT(refusal(r, "tp0"), HasSubstr("'tp0': expected tp followed by a whole number"));
  EXPECT_THAT(refusal(r, "tp99999999999999999999"), HasSubstr("expected tp followed by"));
  EXPECT_THAT(refusal(r, "recompute=some"), HasSubstr("expected recompute=none|selective|full"));
  // The whole is checked as the models check a scenario: 96 heads over tp 7.
  EXPECT_THAT(refusal(r, "tp7 pp16 dp9"),
              AllOf(HasSubstr("as tp7 pp16 dp9"), HasSubstr("heads (96) must be divisible by tp")));
  EXPECT_THAT(refusal(r, "tp8 pp16 dp16"), HasSubstr("uses 2048 GPUs; the request has 1024"));
}

}  // namespace
}  // namespace metron::plan
