#pragma once
// Strong integer ids: a TaskId cannot be passed where a RankId is expected (docs/STYLE.md, Naming).

#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>

namespace metron {

/// An integer id tagged with the kind of thing it names. Default-constructed ids are "none" (-1).
/// @code
///   struct RankTag {};
///   using RankId = StrongId<RankTag>;
///   RankId r{3};
///   if (r.valid()) use(r.index());
/// @endcode
template <class Tag, class Rep = std::int32_t>
class StrongId {
 public:
  using rep_type = Rep;

  constexpr StrongId() noexcept = default;
  constexpr explicit StrongId(Rep value) noexcept : value_(value) {}

  [[nodiscard]] constexpr Rep value() const noexcept { return value_; }
  /// False for the "none" id; ids read from input may still be out of range, which validation
  /// checks.
  [[nodiscard]] constexpr bool valid() const noexcept { return value_ >= 0; }
  /// The id as a container index. Only meaningful when valid().
  [[nodiscard]] constexpr std::size_t index() const noexcept {
    return static_cast<std::size_t>(value_);
  }

  friend constexpr auto operator<=>(StrongId, StrongId) noexcept = default;

 private:
  Rep value_ = -1;
};

}  // namespace metron

template <class Tag, class Rep>
struct std::hash<metron::StrongId<Tag, Rep>> {
  std::size_t operator()(metron::StrongId<Tag, Rep> id) const noexcept {
    return std::hash<Rep>{}(id.value());
  }
};
