// The "sync" object of a scenario (sync_json.h). One table lists every knob once; reading and
// writing both walk it, so a new SyncOptions field needs one line here.

#include "sync_json.h"

#include <string>
#include <tuple>
#include <variant>

namespace metron::scenario::detail {
namespace {

using sync::SyncOptions;

/// An enum knob: its member, printer and parser, and the accepted names for messages.
template <class Enum>
struct EnumField {
  Enum SyncOptions::*member;
  std::string_view (*name_of)(Enum) noexcept;
  std::optional<Enum> (*parse)(std::string_view) noexcept;
  std::string_view expected;
};

using Field = std::variant<std::int64_t SyncOptions::*, std::optional<std::int64_t> SyncOptions::*,
                           std::int32_t SyncOptions::*, std::optional<std::int32_t> SyncOptions::*,
                           bool SyncOptions::*, std::optional<bool> SyncOptions::*,
                           EnumField<sync::Iteration>, EnumField<sync::CommHook>,
                           EnumField<sync::FsdpSharding>, EnumField<sync::BackwardPrefetch>>;

const std::vector<std::pair<std::string_view, Field>>& fields() {
  static const std::vector<std::pair<std::string_view, Field>> kFields{
      {"iteration", EnumField<sync::Iteration>{&SyncOptions::iteration, &sync::to_string,
                                               &sync::parse_iteration, "\"steady\" or \"warmup\""}},
      {"bucket_size", &SyncOptions::bucket_size},
      {"first_bucket_bytes", &SyncOptions::first_bucket_bytes},
      {"comm_hook",
       EnumField<sync::CommHook>{&SyncOptions::comm_hook, &sync::to_string, &sync::parse_comm_hook,
                                 "none, fp16-compress or bf16-compress"}},
      {"overlap_grad_reduce", &SyncOptions::overlap_grad_reduce},
      {"overlap_param_gather", &SyncOptions::overlap_param_gather},
      {"align_param_gather", &SyncOptions::align_param_gather},
      {"overlap_param_gather_with_optimizer_step",
       &SyncOptions::overlap_param_gather_with_optimizer_step},
      {"distributed_optimizer_instances", &SyncOptions::distributed_optimizer_instances},
      {"grad_reduce_in_fp32", &SyncOptions::grad_reduce_in_fp32},
      {"align_grad_reduce", &SyncOptions::align_grad_reduce},
      {"fsdp_sharding", EnumField<sync::FsdpSharding>{&SyncOptions::fsdp_sharding, &sync::to_string,
                                                      &sync::parse_fsdp_sharding,
                                                      "full-shard, shard-grad-op or hybrid-shard"}},
      {"backward_prefetch",
       EnumField<sync::BackwardPrefetch>{&SyncOptions::backward_prefetch, &sync::to_string,
                                         &sync::parse_backward_prefetch, "none, pre or post"}},
      {"limit_all_gathers", &SyncOptions::limit_all_gathers},
      {"reshard_after_forward", &SyncOptions::reshard_after_forward},
      {"hsdp_shard_size", &SyncOptions::hsdp_shard_size},
      {"zero_prefetch_bucket_size", &SyncOptions::zero_prefetch_bucket_size},
      {"zero_param_persistence_threshold", &SyncOptions::zero_param_persistence_threshold},
      {"zero_max_live_parameters", &SyncOptions::zero_max_live_parameters},
      {"zero_max_reuse_distance", &SyncOptions::zero_max_reuse_distance},
      {"zero_synchronous_fetch", &SyncOptions::zero_synchronous_fetch},
      {"zero_per_tensor_collectives", &SyncOptions::zero_per_tensor_collectives},
      {"broadcast_fp16", &SyncOptions::broadcast_fp16},
  };
  return kFields;
}

template <class T>
T read_value(const Json& v, const std::string& path) {
  if constexpr (std::is_same_v<T, bool>) {
    return read_bool(v, path);
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    return read_positive_int32(v, path);
  } else {
    return read_positive_int64(v, path);
  }
}

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};

}  // namespace

sync::SyncOptions read_sync(const Json& v) {
  if (!v.is_object()) fail("sync", "expected an object, got " + brief(v));
  SyncOptions o;
  for (const auto& item : v.items()) {
    const std::string path = "sync." + item.key();
    const Json& value = item.value();
    if (item.key() == "policy") {
      const auto policy =
          value.is_string() ? sync::parse_sync_policy(value.get<std::string>()) : std::nullopt;
      if (!policy) {
        fail(path,
             "expected one of " + std::string(sync::sync_policy_names()) + ", got " + brief(value));
      }
      o.policy = *policy;
      continue;
    }
    const auto field = std::find_if(fields().begin(), fields().end(),
                                    [&](const auto& f) { return f.first == item.key(); });
    if (field == fields().end()) {
      std::string names = "policy";
      for (const auto& f : fields()) names += ", " + std::string(f.first);
      fail(path, "unknown key; expected one of " + names);
    }
    std::visit(
        [&](const auto& member) {
          using M = std::decay_t<decltype(member)>;
          if constexpr (std::is_member_object_pointer_v<M>) {
            using T = std::decay_t<decltype(o.*member)>;
            if constexpr (IsOptional<T>::value) {
              o.*member =
                  value.is_null() ? T{} : T{read_value<typename T::value_type>(value, path)};
            } else {
              o.*member = read_value<T>(value, path);
            }
          } else {
            const auto parsed =
                value.is_string() ? member.parse(value.get<std::string>()) : std::nullopt;
            if (!parsed)
              fail(path, "expected " + std::string(member.expected) + ", got " + brief(value));
            o.*(member.member) = *parsed;
          }
        },
        field->second);
  }
  return o;
}

Json write_sync(const sync::SyncOptions& o) {
  const SyncOptions defaults;
  Json out = {{"policy", sync::to_string(o.policy)}};
  for (const auto& [name, field] : fields()) {
    std::visit(
        [&, key = std::string(name)](const auto& member) {
          using M = std::decay_t<decltype(member)>;
          if constexpr (std::is_member_object_pointer_v<M>) {
            if (o.*member == defaults.*member) return;
            using T = std::decay_t<decltype(o.*member)>;
            if constexpr (IsOptional<T>::value) {
              out[key] = o.*member ? Json(*(o.*member)) : Json(nullptr);
            } else {
              out[key] = o.*member;
            }
          } else {
            if (o.*(member.member) == defaults.*(member.member)) return;
            out[key] = std::string(member.name_of(o.*(member.member)));
          }
        },
        field);
  }
  return out;
}

}  // namespace metron::scenario::detail
