#pragma once
// The largest sizes and durations metron accepts, in one place. Note [input limits]:
//
// Every size that reaches a loop, an allocation or an integer product is bounded here, and every
// entry point (command-line flags, scenario JSON, model JSON, plan requests) checks against these
// constants, so that hostile input is refused with a message naming the value and the limit
// instead of hanging, exhausting memory or overflowing (issue 14). The limits are far above any
// real training run (each constant says why) and small enough that products of them fit int64:
//
//   tokens per microbatch  microbatch_size · seq_len         <= 2^16 · 2^24 = 2^40
//   elements of a GEMM     tokens · max(hidden, ffn, vocab)  <= 2^40 · 2^24 = 2^64, in double;
//                          integer code multiplies at most tokens · ffn <= 2^40 · 2^22 = 2^62
//   samples per iteration  global_batch                      <= 2^24
//   GPUs                   tp · pp · dp · cp                 <= 2^20 (checked as a product)
//
// Durations become int64 nanoseconds (sim::Time). One task lasts at most kMaxTaskSeconds, and a
// simulated step is refused when the sum of its durations exceeds kMaxStepNanoseconds, so that no
// time (a makespan is at most the sum of all durations, scaled by the compute slowdown) can
// overflow.

#include <cstdint>

namespace metron::models {

/// Transformer layers: the largest published models have about 200; 2^16 leaves room for tests
/// of deep, thin models.
inline constexpr std::int64_t kMaxLayers = std::int64_t{1} << 16;
/// hidden, heads, kv_heads and moe.ffn_hidden (ffn_hidden: 4x this, as its default is 4·hidden):
/// today's largest hidden sizes are about 2^15 (ffn about 2^17); 2^20 is 32x beyond.
inline constexpr std::int64_t kMaxWidth = std::int64_t{1} << 20;
/// Vocabulary entries: the largest tokenizers have about 2^18; 2^24 is 64x beyond.
inline constexpr std::int64_t kMaxVocab = std::int64_t{1} << 24;
/// Experts of a mixture-of-experts layer: published models use up to a few hundred.
inline constexpr std::int64_t kMaxExperts = std::int64_t{1} << 16;
/// Tokens per sample: million-token contexts are 2^20; 2^24 is 16x beyond.
inline constexpr std::int64_t kMaxSeqLen = std::int64_t{1} << 24;
/// Samples per microbatch: real runs use 1 to a few hundred.
inline constexpr std::int64_t kMaxMicrobatchSize = std::int64_t{1} << 16;
/// Samples per iteration: LLM batches are a few thousand samples (millions of tokens); 2^24.
inline constexpr std::int64_t kMaxGlobalBatch = std::int64_t{1} << 24;
/// Microbatches per pipeline per iteration: every microbatch becomes tasks of every stage, so
/// this bounds the graph. Real gradient accumulation uses at most a few thousand; 2^16.
inline constexpr std::int64_t kMaxMicrobatches = std::int64_t{1} << 16;
/// GPUs, and each parallel size (tp, pp, dp, vp, cp, ep) and the product tp·pp·dp·cp: the
/// largest clusters have about 2^17 GPUs; 2^20 is 8x beyond.
inline constexpr std::int64_t kMaxGpus = std::int64_t{1} << 20;
/// Compute actions of one pipeline per iteration, microbatches · pp · vp (each is a forward and
/// a backward task or three, plus their transfers): 2^22 keeps a simulated step within a few GB
/// of memory; real steps have up to about 10^5.
inline constexpr std::int64_t kMaxPipelineActions = std::int64_t{1} << 22;
/// Compute actions of a whole simulated step, every data-parallel replica included (simulate
/// --full): 2^24, a few tens of GB of graph at most.
inline constexpr std::int64_t kMaxStepActions = std::int64_t{1} << 24;
/// One task's duration (an explicit cost, a profiled time, a modelled time): a day, where one
/// microbatch of one stage takes milliseconds to seconds in practice.
inline constexpr double kMaxTaskSeconds = 86'400;
/// The sum of every task duration of one step, in nanoseconds: 2^60 ns (36 years) leaves 8x
/// headroom below int64's 2^63 for the compute slowdown during communication.
inline constexpr std::int64_t kMaxStepNanoseconds = std::int64_t{1} << 60;
/// Configurations the planner writes traces or scenarios for (--trace-top, --save-scenario-top):
/// far more than anyone reads, and each costs a simulation or a file.
inline constexpr std::int64_t kMaxRanked = std::int64_t{1} << 16;
/// Worker threads of the planner: more than the cores of any machine; each thread costs a stack.
inline constexpr std::int64_t kMaxThreads = 1024;

}  // namespace metron::models
