#pragma once
// One action of the per-rank text form: PyTorch's pipelining action syntax (`0F0`, `2I1`, `3W1`,
// `1B0`, `0SEND_F1`, `1RECV_B0`, `0UNSHARD`, `(0F7;7B3)OVERLAP_F_B`), extended by metron with
// the tokens a whole training step needs. Note [action syntax]:
//
//   compute   <stage>F<mb> | <stage>I<mb> | <stage>W<mb> | <stage>B<mb> | <stage>R<mb>   R:
//   recompute
//             [<stage>]STEP | [<stage>]OTHER[<mb>]                optimizer step / other compute
//   p2p       <stage>SEND_F<mb>[@<peer>]  <stage>RECV_F<mb>[@<peer>]   (RECV uses the receiving
//             <stage>SEND_B<mb>[@<peer>]  <stage>RECV_B<mb>[@<peer>]    stage, as in PyTorch)
//   pytorch   <stage>UNSHARD | <stage>RESHARD | <stage>REDUCE_GRAD     (text only, no graph form)
//   overlap   (<compute>;<compute>)OVERLAP_F_B                        DualPipe's F&B unit
//   collective OP[<group>#<seq>,bytes=<n>{,key=value}]                OP: ALL_REDUCE REDUCE_SCATTER
//             keys in this order: dtype, root, bucket, count, stage,  ALL_GATHER REDUCE BROADCAST
//             mb, stream (dtype only when not fp32, count only        ALL_TO_ALL
//             when not 1)
//   host wait WAIT(<action>)   the host blocks until the latest earlier action equal to <action>
//                              on the same rank has completed
//   idle      _                (an empty cell in CSV)
//
// `@<peer>` names the peer rank and is written only when the neighbouring stage does not have
// exactly one owning rank to infer it from (data-parallel replicas, or an inconsistent graph).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "metron/ir/task.h"

namespace metron::ir {

enum class ActionType : std::uint8_t {
  kForward,
  kBackwardInput,
  kBackwardWeight,
  kBackward,
  kRecompute,
  kOptimizerStep,
  kOtherCompute,
  kSendForward,
  kRecvForward,
  kSendBackward,
  kRecvBackward,
  kUnshard,
  kReshard,
  kReduceGrad,
  kOverlapForwardBackward,
  kCollective,
  kHostWait,
};

/// The collective part of an action (kCollective only).
struct CollectiveAction {
  CollectiveOp op = CollectiveOp::kAllReduce;
  std::string group;
  std::int64_t seq = 0;
  std::int64_t bytes = 0;
  DType dtype = DType::kFp32;
  std::optional<std::int32_t> root;
  std::optional<std::int32_t> bucket;
  std::int32_t count = 1;             ///< ir::Collective::count
  std::optional<std::string> stream;  ///< absent means the default stream "comm"
  friend bool operator==(const CollectiveAction&, const CollectiveAction&) = default;
};

/// One token of a rank's row. `stage` and `microbatch` are -1 when the token has none.
struct Action {
  ActionType type = ActionType::kForward;
  std::int32_t stage = -1;
  std::int32_t microbatch = -1;
  std::optional<std::int32_t> peer;            ///< p2p only: explicit `@peer`
  std::optional<CollectiveAction> collective;  ///< kCollective only
  /// kOverlapForwardBackward: the two compute actions; kHostWait: the awaited action.
  std::vector<Action> sub;
  friend bool operator==(const Action&, const Action&) = default;
};

/// The deepest nesting of WAIT(...) and (...)OVERLAP_F_B in one token. Real schedules nest once
/// (WAIT(0F1)) or twice; the parser recurses per level, so deeper tokens are refused.
inline constexpr std::size_t kMaxActionNesting = 16;

/// Parses one token (not `_`). Throws ParseError at `source:line:column` (column of the token's
/// start plus the offset of the problem) naming what was expected, also for a token nested deeper
/// than kMaxActionNesting.
/// @code
///   Action a = parse_action("0SEND_F1");
///   assert(to_string(a) == "0SEND_F1");
/// @endcode
Action parse_action(std::string_view token, const std::string& source = "<action>",
                    std::size_t line = 1, std::size_t column = 1);

/// The canonical token; parse_action(to_string(a)) == a.
std::string to_string(const Action& action);

/// Whether the text form can spell `name` as a group or stream name: not empty, and only letters,
/// digits, '_', '-' and '.'. A JSON graph may name them with any string.
bool is_text_form_name(std::string_view name) noexcept;

}  // namespace metron::ir
