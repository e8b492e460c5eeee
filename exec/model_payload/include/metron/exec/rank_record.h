#pragma once
// What one rank of a model-payload run trained (model_rank.h), and how rank 0 puts the ranks'
// records together into each replica's TrainingRecord for the check (training_check.h), after
// they travelled through the rank store as bytes.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "metron/exec/training_check.h"

namespace metron::exec {

/// What one rank trained: the losses of the microbatches its last stages ran (NaN elsewhere)
/// and its stages' parameters after the last step.
struct RankRecord {
  std::int32_t replica = 0;
  TrainingRecord record;
  /// By parameter name, the elements that another replica stepped last and that were not
  /// gathered here since (a sharded optimizer's run that ends before its next gather: FSDP,
  /// Megatron's overlap_param_gather); absent when the rank holds all of a parameter current.
  std::map<std::string, std::vector<std::int64_t>> stale;
};

/// Replica `replica`'s run, from every rank's record: the losses of all ranks together (each
/// microbatch's loss comes from the replica that ran it) and the parameters of that replica's
/// ranks, each stale element taken from a rank of another replica that holds it current (what
/// consolidating a sharded checkpoint does); NaN where none does, which fails the check. Throws
/// InvalidConfig where records disagree in shape or a parameter comes twice.
TrainingRecord replica_record(const std::vector<RankRecord>& ranks, std::int32_t replica);

/// A RankRecord as bytes and back, for gathering records through a rank store.
std::string encode_record(const RankRecord& record);
/// Throws InvalidConfig for bytes that encode_record did not write.
RankRecord decode_record(std::string_view bytes);

}  // namespace metron::exec
