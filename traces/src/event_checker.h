#pragma once
// Private: the Checker that applies the rules to traceEvents, each event alone and then across
// events; its members are defined in event_checker.cc, cross_event_checks.cc, hta_event_checks.cc.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "metron/traces/trace_checker.h"
#include "trace_text.h"
#include "trace_values.h"

namespace metron::traces::detail {

/// What one event is, as far as the cross-event rules need it; unset fields were invalid (and
/// already reported) or absent.
struct Event {
  std::string ph;
  std::string name;
  bool has_name = false;
  std::string cat;
  bool has_cat = false;
  std::optional<std::int64_t> pid;
  std::optional<std::int64_t> tid;
  std::optional<std::int64_t> ts;
  std::optional<std::int64_t> dur;
};

/// A slice on a row: an X event or a matched B/E pair, in nanoseconds.
struct Interval {
  std::int64_t start = 0;
  std::int64_t end = 0;
  std::size_t index = 0;              ///< the X or B event
  std::optional<std::size_t> parent;  ///< enclosing interval (position in the sorted row)
};

using Row = std::pair<std::int64_t, std::int64_t>;

class Checker {
 public:
  Checker(const Json& events, const TraceCheckOptions& options)
      : events_(events), options_(options) {}

  std::vector<std::string> run(const RawFacts& raw);

 private:
  // Naming events and recording violations (event_checker.cc).
  std::string describe(std::size_t i) const;
  std::string short_name(std::size_t i) const;
  void add(std::size_t i, const std::string& rule);

  // The rules on each event alone (event_checker.cc).
  static bool on_thread_row(const std::string& ph, const Json& e);
  void check_event(std::size_t i);
  void check_strings(std::size_t i, const Json& e, Event& info);
  void check_ids(std::size_t i, const Json& e, Event& info);
  std::optional<std::int64_t> check_id(std::size_t i, const Json& e, const char* key,
                                       bool required);
  void check_time(std::size_t i, const Json& e, const char* key, std::optional<std::int64_t>& out);
  void check_flow_fields(std::size_t i, const Json& e, const Event& info);
  void check_counter(std::size_t i, const Json& e);
  void check_metadata_event(std::size_t i, const Json& e, const Event& info);

  // The rules that relate events to each other (cross_event_checks.cc).
  void check_begin_end();
  void check_nesting();
  void check_flows_v2();
  std::optional<std::size_t> enclosing_slice(const Row& row, std::int64_t ts) const;
  void check_flows_v1();
  void check_flow_binding(std::size_t i);
  void check_metadata_values();

  // HTA's rules (hta_event_checks.cc).
  static bool is_gpu_work_category(const std::string& cat);
  static bool is_cpu_category(const std::string& cat);
  void check_hta_events();
  void check_gpu_event(std::size_t i, const Json* args, const Json* stream);

  const Json& events_;
  const TraceCheckOptions& options_;
  std::vector<Event> info_;
  std::map<Row, std::vector<Interval>> rows_;
  std::vector<std::string> violations_;
};

}  // namespace metron::traces::detail
