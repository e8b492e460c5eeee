#pragma once
// One entry per system of Note [sync policies] (sync_policy.h); add_sync_policy dispatches.
// Each works through a SyncContext and leaves placement to ctx.finish().

#include "metron/sync/sync_policy.h"
#include "sync_context.h"

namespace metron::sync::detail {

void add_ddp_sync(SyncContext& ctx, const SyncOptions& options);        // sync_ddp.cc
void add_megatron_sync(SyncContext& ctx, const SyncOptions& options);   // sync_megatron.cc
void add_fairscale_sync(SyncContext& ctx, const SyncOptions& options);  // sync_fairscale.cc
void add_zero_sync(SyncContext& ctx, const SyncOptions& options);       // sync_zero.cc
void add_fsdp_sync(SyncContext& ctx, const SyncOptions& options);       // sync_fsdp.cc

}  // namespace metron::sync::detail
