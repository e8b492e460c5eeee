#include "metron/models/model_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "metron/base/error.h"

namespace metron::models {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;
using ::testing::UnorderedElementsAre;

ModelSpec tiny() {
  return {.name = "tiny", .layers = 2, .hidden = 8, .heads = 2, .vocab = 10, .seq_len = 4};
}

TEST(Precision, NamesRoundTrip) {
  for (Precision p : {Precision::kBf16, Precision::kFp16, Precision::kFp32, Precision::kFp8}) {
    EXPECT_EQ(parse_precision(to_string(p)), p);
  }
  EXPECT_EQ(to_string(Precision::kBf16), "bf16");
  EXPECT_EQ(parse_precision("int8"), std::nullopt);
}

TEST(MlpKind, NamesRoundTrip) {
  EXPECT_EQ(to_string(MlpKind::kGelu), "gelu");
  EXPECT_EQ(to_string(MlpKind::kSwiglu), "swiglu");
  EXPECT_EQ(parse_mlp_kind("swiglu"), MlpKind::kSwiglu);
  EXPECT_EQ(to_string(MlpKind::kSquaredRelu), "squared-relu");
  EXPECT_EQ(parse_mlp_kind("squared-relu"), MlpKind::kSquaredRelu);
  EXPECT_EQ(parse_mlp_kind("relu"), std::nullopt);
}

TEST(ModelSpec, DefaultsFollowHeadsAndHidden) {
  ModelSpec spec = tiny();
  EXPECT_EQ(spec.num_kv_heads(), 2);
  EXPECT_EQ(spec.ffn_size(), 32);
  EXPECT_EQ(spec.head_dim(), 4);
  spec.kv_heads = 1;
  spec.ffn_hidden = 20;
  EXPECT_EQ(spec.num_kv_heads(), 1);
  EXPECT_EQ(spec.ffn_size(), 20);
}

void expect_invalid(const ModelSpec& spec, const std::string& message) {
  EXPECT_THAT([&] { validate(spec); }, ThrowsMessage<InvalidConfig>(HasSubstr(message)));
}

TEST(ValidateModel, AcceptsAValidSpec) { EXPECT_NO_THROW(validate(tiny())); }

TEST(ValidateModel, RejectsNonPositiveSizes) {
  const auto with = [](auto change) {
    ModelSpec spec = tiny();
    change(spec);
    return spec;
  };
  const std::string where = "invalid model \"tiny\": ";
  expect_invalid(with([](ModelSpec& s) { s.layers = 0; }),
                 where + "layers: expected a positive integer, got 0");
  expect_invalid(with([](ModelSpec& s) { s.vocab = -1; }),
                 where + "vocab: expected a positive integer, got -1");
  expect_invalid(with([](ModelSpec& s) { s.seq_len = 0; }),
                 where + "seq_len: expected a positive integer, got 0");
  expect_invalid(with([](ModelSpec& s) { s.ffn_hidden = 0; }),
                 where + "ffn_hidden: expected a positive integer, got 0");
  expect_invalid(with([](ModelSpec& s) { s.kv_heads = 0; }),
                 where + "kv_heads: expected a positive integer, got 0");
  expect_invalid(with([](ModelSpec& s) { s.make_vocab_size_divisible_by = 0; }),
                 where + "make_vocab_size_divisible_by: expected a positive integer, got 0");
}

TEST(ValidateModel, RejectsHiddenNotDivisibleByHeads) {
  ModelSpec spec = tiny();
  spec.heads = 3;
  expect_invalid(spec, "invalid model \"tiny\": hidden (8) must be divisible by heads (3)");
}

TEST(ValidateModel, RejectsHeadsNotDivisibleByKvHeads) {
  ModelSpec spec = tiny();
  spec.hidden = 12;
  spec.heads = 6;
  spec.kv_heads = 4;
  expect_invalid(spec, "invalid model \"tiny\": heads (6) must be divisible by kv_heads (4)");
  spec.kv_heads = 12;  // more KV heads than heads
  expect_invalid(spec, "heads (6) must be divisible by kv_heads (12)");
}

TEST(ValidateModel, RejectsTopKAboveExperts) {
  ModelSpec spec = tiny();
  spec.moe = MoeSpec{.experts = 2, .top_k = 3, .ffn_hidden = 16};
  expect_invalid(spec, "invalid model \"tiny\": moe.top_k (3) must be <= moe.experts (2)");
  spec.moe = MoeSpec{.experts = 2, .top_k = 1, .ffn_hidden = 0};
  expect_invalid(spec, "moe.ffn_hidden: expected a positive integer, got 0");
}

TEST(ValidateModel, ListsEveryProblem) {
  ModelSpec spec = tiny();
  spec.layers = 0;
  spec.heads = 3;
  expect_invalid(spec,
                 "invalid model \"tiny\": 2 problems\n"
                 "  - layers: expected a positive integer, got 0\n"
                 "  - hidden (8) must be divisible by heads (3)");
}

TEST(ModelJson, WritesCanonicalText) {
  ModelSpec spec = tiny();
  spec.kv_heads = 1;
  spec.moe = MoeSpec{.experts = 4, .top_k = 2, .ffn_hidden = 16};
  EXPECT_EQ(to_json(spec),
            R"({"name":"tiny","layers":2,"hidden":8,"heads":2,"kv_heads":1,"vocab":10,)"
            R"("seq_len":4,"dtype":"bf16","tied_embeddings":false,)"
            R"("moe":{"experts":4,"top_k":2,"ffn_hidden":16},"mlp":"gelu"})"
            "\n");
}

TEST(ModelJson, ReadsDefaultsForOptionalKeys) {
  const ModelSpec spec =
      model_from_json(R"({"name":"tiny","layers":2,"hidden":8,"heads":2,"vocab":10,"seq_len":4})");
  EXPECT_EQ(spec, tiny());
}

TEST(ModelJson, RoundTripsEveryField) {
  const ModelSpec spec{.name = "full",
                       .layers = 3,
                       .hidden = 16,
                       .heads = 4,
                       .kv_heads = 2,
                       .ffn_hidden = 40,
                       .vocab = 100,
                       .seq_len = 32,
                       .dtype = Precision::kFp8,
                       .tied_embeddings = true,
                       .moe = MoeSpec{.experts = 8, .top_k = 2, .ffn_hidden = 24},
                       .mlp = MlpKind::kSwiglu,
                       .make_vocab_size_divisible_by = 64};
  EXPECT_EQ(model_from_json(to_json(spec)), spec);
}

TEST(ModelJson, CountsUnknownKeysAtTheirPath) {
  Diagnostics diagnostics;
  const ModelSpec spec = model_from_json(
      R"({"name":"tiny","layers":2,"hidden":8,"heads":2,"vocab":10,"seq_len":4,"rope":1,)"
      R"("moe":{"experts":2,"top_k":1,"ffn_hidden":8,"capacity":1.25}})",
      "model.json", &diagnostics);
  EXPECT_EQ(spec.moe->experts, 2);
  EXPECT_EQ(diagnostics.count("unknown_key"), 2u);
  EXPECT_THAT(diagnostics.messages(),
              UnorderedElementsAre(::testing::StartsWith("rope: unknown key"),
                                   ::testing::StartsWith("moe.capacity: unknown key")));
}

void expect_parse_error(const std::string& text, const std::string& message) {
  EXPECT_THAT([&] { (void)model_from_json(text, "model.json"); },
              ThrowsMessage<ParseError>(HasSubstr(message)))
      << text;
}

// The required keys, to which each error test below adds or overrides one.
std::string json_with(const std::string& extra) {
  return R"({"name":"tiny","layers":2,"hidden":8,"heads":2,"vocab":10,"seq_len":4)" + extra + "}";
}

TEST(ModelJson, RejectsMalformedJsonWithItsPosition) {
  expect_parse_error("{\n  \"name\": }", "model.json:2:11: malformed JSON: syntax error");
}

TEST(ModelJson, RejectsANonObject) {
  expect_parse_error("[1]", "model.json: top level: expected an object, got [1]");
  expect_parse_error(json_with(R"(,"moe":3)"), "model.json: moe: expected an object, got 3");
}

TEST(ModelJson, RejectsAMissingKey) {
  expect_parse_error(R"({"name":"x"})", "model.json: top level: missing key \"layers\"");
  expect_parse_error(json_with(R"(,"moe":{"experts":2})"),
                     "model.json: moe: missing key \"top_k\"");
}

TEST(ModelJson, RejectsSizesThatAreNotPositiveIntegers) {
  expect_parse_error(json_with(R"(,"hidden":"x")"),
                     "model.json: hidden: expected a positive integer, got \"x\"");
  expect_parse_error(json_with(R"(,"kv_heads":0)"),
                     "model.json: kv_heads: expected a positive integer, got 0");
  expect_parse_error(json_with(R"(,"ffn_hidden":-4)"),
                     "model.json: ffn_hidden: expected a positive integer, got -4");
  expect_parse_error(json_with(R"(,"layers":2.5)"),
                     "model.json: layers: expected a positive integer, got 2.5");
  expect_parse_error(json_with(R"(,"vocab":true)"),
                     "model.json: vocab: expected a positive integer, got true");
  expect_parse_error(json_with(R"(,"seq_len":18446744073709551615)"),
                     "model.json: seq_len: expected a positive integer, got 18446744073709551615");
  expect_parse_error(json_with(R"(,"moe":{"experts":2,"top_k":0,"ffn_hidden":8})"),
                     "model.json: moe.top_k: expected a positive integer, got 0");
}

TEST(ModelJson, RejectsWrongTypesAndNames) {
  expect_parse_error(R"({"name":7})", "model.json: name: expected a string, got 7");
  expect_parse_error(json_with(R"(,"tied_embeddings":1)"),
                     "model.json: tied_embeddings: expected true or false, got 1");
  expect_parse_error(json_with(R"(,"dtype":"int8")"),
                     "model.json: dtype: expected one of \"bf16\", \"fp16\", \"fp32\", \"fp8\", "
                     "got \"int8\"");
  expect_parse_error(json_with(R"(,"mlp":3)"),
                     "model.json: mlp: expected one of \"gelu\", \"swiglu\", "
                     "\"squared-relu\", got 3");
}

TEST(ModelJson, RejectsInconsistentSizesAsInvalidConfig) {
  EXPECT_THAT([] { (void)model_from_json(json_with(R"(,"kv_heads":3)"), "model.json"); },
              ThrowsMessage<InvalidConfig>(HasSubstr(
                  "invalid model \"tiny\": heads (2) must be divisible by kv_heads (3)")));
}

TEST(ModelJson, RejectsANameThatIsNotUtf8WhenWriting) {
  ModelSpec spec = tiny();
  spec.name = "bad\xff";
  EXPECT_THAT([&] { (void)to_json(spec); },
              ThrowsMessage<InvalidConfig>(HasSubstr("cannot write JSON: invalid UTF-8")));
}

// Issue 14: an unknown key's message names the keys the object may have and the nearest one.
TEST(ModelJson, UnknownKeysNameTheValidKeysAndTheNearest) {
  Diagnostics diagnostics;
  (void)model_from_json(
      R"({"name":"t","layers":2,"hidden":8,"heads":2,"kv_head":1,"vocab":10,"seq_len":4})",
      "m.json", &diagnostics);
  ASSERT_EQ(diagnostics.count("unknown_key"), 1u);
  const std::string& message = diagnostics.messages().front();
  EXPECT_THAT(message, ::testing::StartsWith("kv_head: unknown key; expected one of \"name\""));
  EXPECT_THAT(message, HasSubstr("\"ffn_hidden\""));
  EXPECT_THAT(message, ::testing::EndsWith("did you mean \"kv_heads\"?"));
  Diagnostics far;
  (void)model_from_json(
      R"({"name":"t","layers":2,"hidden":8,"heads":2,"colour":1,"vocab":10,"seq_len":4})", "m.json",
      &far);
  EXPECT_THAT(far.messages().front(), ::testing::Not(HasSubstr("did you mean")));
}

TEST(ModelJson, AMisspeltRequiredKeyIsNamedAsTheLikelyTypo) {
  EXPECT_THAT(
      [] {
        (void)model_from_json(
            R"({"name":"t","layers":2,"hiden":8,"heads":2,"vocab":10,"seq_len":4})", "m.json");
      },
      ThrowsMessage<ParseError>(
          HasSubstr("m.json: top level: missing key \"hidden\" (is \"hiden\" a typo?)")));
}

// Issue 14: sizes far beyond any real model are refused naming the key and the limit.
TEST(ModelSpecValidation, RefusesSizesAboveTheirLimits) {
  EXPECT_THAT(
      [] {
        (void)model_from_json(R"({"name":"t","layers":2,"hidden":8,"heads":2,"vocab":10,)"
                              R"("seq_len":1099511627776})",
                              "m.json");
      },
      ThrowsMessage<InvalidConfig>(
          HasSubstr("seq_len: expected at most 16777216 (the limit of sequence lengths), got "
                    "1099511627776")));
  // hidden near int64's limit: 4·hidden (the default ffn) must not overflow on the way.
  EXPECT_THAT(
      [] {
        (void)model_from_json(R"({"name":"t","layers":2,"hidden":4611686018427387904,)"
                              R"("heads":2,"vocab":10,"seq_len":4})",
                              "m.json");
      },
      ThrowsMessage<InvalidConfig>(HasSubstr("hidden: expected at most 1048576")));
  EXPECT_THAT(
      [] {
        (void)model_from_json(
            R"({"name":"t","layers":100000,"hidden":8,"heads":2,"vocab":10,"seq_len":4})",
            "m.json");
      },
      ThrowsMessage<InvalidConfig>(HasSubstr("layers: expected at most 65536")));
}

// Megatron's _vocab_size_with_padding: the vocabulary rounded up to a multiple of
// make_vocab_size_divisible_by (128) times tp, then split over tp.
TEST(ModelSpec, PadsTheVocabularyAsMegatronDoes) {
  ModelSpec gpt2 = tiny();
  gpt2.vocab = 50257;
  EXPECT_EQ(gpt2.vocab_divisor(), 128);
  EXPECT_EQ(gpt2.vocab_per_rank(1), 50304);  // 393 · 128
  EXPECT_EQ(gpt2.vocab_per_rank(8), 6400);   // 51200 = 50 · 1024, over 8
  ModelSpec llama3 = tiny();
  llama3.vocab = 128256;                        // 1002 · 128
  EXPECT_EQ(llama3.vocab_per_rank(1), 128256);  // already a multiple
  EXPECT_EQ(llama3.vocab_per_rank(8), 16128);   // 129024 = 126 · 1024, over 8
  gpt2.make_vocab_size_divisible_by = 1;        // no padding beyond what splitting needs
  EXPECT_EQ(gpt2.vocab_per_rank(1), 50257);
  EXPECT_EQ(gpt2.vocab_per_rank(8), 6283);  // ⌈50257 / 8⌉
  EXPECT_EQ(model_from_json(json_with(R"(,"make_vocab_size_divisible_by":64)"))
                .make_vocab_size_divisible_by,
            64);
  expect_parse_error(json_with(R"(,"make_vocab_size_divisible_by":0)"),
                     "make_vocab_size_divisible_by: expected a positive integer, got 0");
}

}  // namespace
}  // namespace metron::models
