#pragma once
// What a pipeline schedule is asked to produce, and the form it produces it in.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "metron/ir/action_rows.h"

namespace metron::pipeline {

/// Per-stage times in milliseconds (a scenario's `costs`), used by zb-auto; empty means unit times.
struct StageTimes {
  std::vector<double> forward;          ///< F per stage
  std::vector<double> backward_input;   ///< I per stage
  std::vector<double> backward_weight;  ///< W per stage
  double p2p = 0;                       ///< one point-to-point transfer
};

/// The inputs every generator takes (docs/SCHEDULES.md notation: p = pp, v = vp, m = microbatches).
struct ScheduleSpec {
  std::string name = "1f1b";
  std::int32_t pp = 1;            ///< pipeline ranks
  std::int32_t vp = 1;            ///< chunks (virtual stages) per rank; 2 for V schedules
  std::int32_t microbatches = 1;  ///< per iteration (per direction pair for DualPipe: total)
  std::optional<std::int32_t> group_size;    ///< Megatron interleaved N; default pp
  bool forward_only = false;                 ///< inference: forwards only
  std::optional<std::int32_t> memory_limit;  ///< zb-auto: max pending backwards K (ZB-1p: K = p)
  StageTimes times;                          ///< zb-auto
};

/// A schedule's per-rank compute order: ir::ActionRows holding only compute actions
/// (F, I, W, B and OVERLAP_F_B) with global stage indices, in each rank's issue order, and no
/// groups. Generators emit no idle slots; passes that add communication keep this form.
/// Stage indices: loop placement puts stage c·p + r on rank r (chunk c); V placement puts
/// stages r and 2p−1−r on rank r.
using Order = ir::ActionRows;

}  // namespace metron::pipeline
