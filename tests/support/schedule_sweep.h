#pragma once
// Every accepted (p, v, m) combination of a schedule, for tests that check a property on all of
// them: p = 1..max_pp, v = 1..max_vp (or the schedule's fixed chunk count), m = 1..3p+2.

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>

#include "metron/base/error.h"
#include "metron/pipeline/registry.h"

namespace metron::pipeline::testing {

/// Calls f(spec, order) for each combination the generator accepts (rejections are tested with
/// each generator), under a SCOPED_TRACE naming it. Returns how many it visited.
inline int sweep(const ScheduleInfo& info,
                 const std::function<void(const ScheduleSpec&, const Order&)>& f,
                 std::int32_t max_pp = 8, std::int32_t max_vp = 4) {
  int visited = 0;
  for (std::int32_t p = 1; p <= max_pp; ++p) {
    for (std::int32_t v = 1; v <= max_vp; ++v) {
      if (info.fixed_vp != 0 && v != info.fixed_vp) continue;
      for (std::int32_t m = 1; m <= 3 * p + 2; ++m) {
        const ScheduleSpec spec{
            .name = std::string(info.name), .pp = p, .vp = v, .microbatches = m};
        Order order;
        try {
          order = generate_order(spec);
        } catch (const InvalidConfig&) {
          continue;
        }
        SCOPED_TRACE(::testing::Message() << info.name << " p=" << p << " v=" << v << " m=" << m);
        f(spec, order);
        ++visited;
      }
    }
  }
  return visited;
}

}  // namespace metron::pipeline::testing
