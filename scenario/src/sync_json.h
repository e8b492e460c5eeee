#pragma once
// The "sync" object of a scenario (Note [scenario JSON]): the policy's name and any knob of
// sync::SyncOptions, under the same names ("bucket_size", "overlap_grad_reduce", ...).

#include "json_paths.h"
#include "metron/sync/sync_policy.h"

namespace metron::scenario::detail {

/// Reads a "sync" object; unknown keys and wrong values throw PathError naming "sync.<key>".
sync::SyncOptions read_sync(const Json& v);
/// The object to_json writes: the policy, then every knob that differs from its default.
Json write_sync(const sync::SyncOptions& options);

}  // namespace metron::scenario::detail
