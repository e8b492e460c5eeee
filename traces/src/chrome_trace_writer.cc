#include "metron/traces/chrome_trace_writer.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <variant>
#include <vector>

#include "metron/base/error.h"
#include "metron/base/file_io.h"

namespace metron::traces {
namespace {

// The replacement character U+FFFD in UTF-8: what invalid input bytes become, so a name stays
// readable and the file stays valid UTF-8 (RFC 8259 §8.1).
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

/// Length of the valid UTF-8 sequence starting at `s[i]` (a non-ASCII lead byte), or 0 when the
/// bytes there are not one: overlong forms, surrogates and code points above U+10FFFF included.
std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  std::size_t length = 0;
  unsigned char low = 0x80;  // allowed range of the second byte (Unicode Table 3-7)
  unsigned char high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return 0;
  }
  if (i + length > s.size()) return 0;
  if (byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (std::size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

/// `s` as a JSON string literal in the form Perfetto reads back unchanged (docs/TRACES.md §1.6,
/// "Strings"): control characters (C0, DEL, C1) dropped, quotes and backslashes escaped, other
/// text as raw UTF-8 (Perfetto does not decode \u escapes), invalid bytes replaced by U+FFFD.
void append_string(std::string& out, std::string_view s) {
  out += '"';
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c == '"' || c == '\\') {
        out += '\\';
        out += static_cast<char>(c);
      } else if (c >= 0x20 && c != 0x7F) {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    const std::size_t length = utf8_sequence_length(s, i);
    if (length == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    // U+0080..U+009F (C1 controls) are encoded C2 80..C2 9F.
    const bool c1_control = c == 0xC2 && static_cast<unsigned char>(s[i + 1]) <= 0x9F;
    if (!c1_control) out.append(s.substr(i, length));
    i += length;
  }
  out += '"';
}

void append_integer(std::string& out, std::int64_t value) { out += std::to_string(value); }

/// Integer nanoseconds as microseconds with exactly three decimals, digit by digit, so that every
/// value is exact (1234567 → "1234.567"; a double would round large values).
void append_microseconds(std::string& out, std::int64_t ns) {
  // The magnitude as unsigned, so that INT64_MIN has one too.
  const std::uint64_t magnitude =
      ns < 0 ? ~static_cast<std::uint64_t>(ns) + 1 : static_cast<std::uint64_t>(ns);
  if (ns < 0) out += '-';
  out += std::to_string(magnitude / 1000);
  const std::uint64_t fraction = magnitude % 1000;
  out += '.';
  out += static_cast<char>('0' + fraction / 100);
  out += static_cast<char>('0' + fraction / 10 % 10);
  out += static_cast<char>('0' + fraction % 10);
}

/// A finite double in the shortest form that reads back to the same value (std::to_chars is
/// locale-free and deterministic). Callers skip non-finite values: strict JSON has none.
void append_double(std::string& out, double value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, result.ptr);
}

bool is_finite_arg(const Arg& arg) {
  const double* number = std::get_if<double>(&arg.value);
  return number == nullptr || std::isfinite(*number);
}

void append_key(std::string& out, std::string_view key) {
  append_string(out, key);
  out += ": ";
}

/// `{"k": v, ...}`; arguments whose value is NaN or infinite are left out (docs/TRACES.md §6.1).
void append_args(std::string& out, const std::vector<Arg>& args) {
  out += '{';
  bool first = true;
  for (const Arg& arg : args) {
    if (!is_finite_arg(arg)) continue;
    if (!first) out += ", ";
    first = false;
    append_key(out, arg.key);
    if (const auto* i = std::get_if<std::int64_t>(&arg.value)) {
      append_integer(out, *i);
    } else if (const auto* d = std::get_if<double>(&arg.value)) {
      append_double(out, *d);
    } else {
      append_string(out, std::get<std::string>(arg.value));
    }
  }
  out += '}';
}

void append_field(std::string& out, std::string_view key, std::int64_t value) {
  out += ", ";
  append_key(out, key);
  append_integer(out, value);
}

void append_field(std::string& out, std::string_view key, std::string_view value) {
  out += ", ";
  append_key(out, key);
  append_string(out, value);
}

void append_time_field(std::string& out, std::string_view key, std::int64_t ns) {
  out += ", ";
  append_key(out, key);
  append_microseconds(out, ns);
}

/// The start of every event: `{"ph": "X", "name": ...`; the caller closes it.
std::string event_start(std::string_view ph) {
  std::string out = "{\"ph\": ";
  append_string(out, ph);
  return out;
}

/// `{"ph": "M", "name": <what>, "pid": .., ["tid": ..,] "ts": 0.000, "args": {...}}`. ts 0 for
/// Perfetto versions before 2026-02, which require ts on M events too (docs/TRACES.md §1.4).
std::string metadata_event(std::string_view what, std::int64_t pid, const std::int64_t* tid,
                           const std::vector<Arg>& args) {
  std::string out = event_start("M");
  append_field(out, "name", what);
  append_field(out, "pid", pid);
  if (tid != nullptr) append_field(out, "tid", *tid);
  append_time_field(out, "ts", 0);
  out += ", \"args\": ";
  append_args(out, args);
  out += '}';
  return out;
}

std::string slice_event(const Slice& s) {
  if (s.flow_in && s.flow_out) {
    // A v2 flow end is one bind_id per event; two different arrows cannot share it, and the
    // same id on both ends would make a step of one arrow through itself.
    throw InvalidConfig("trace slice \"" + s.name + "\" (pid " + std::to_string(s.pid) + " tid " +
                        std::to_string(s.tid) + "): has both flow_in " +
                        std::to_string(*s.flow_in) + " and flow_out " +
                        std::to_string(*s.flow_out) +
                        "; a v2 flow binds one id per slice, so put one end on another slice");
  }
  std::string out = event_start("X");
  append_field(out, "cat", s.cat);
  append_field(out, "name", s.name);
  append_field(out, "pid", s.pid);
  append_field(out, "tid", s.tid);
  append_time_field(out, "ts", s.start_ns);
  append_time_field(out, "dur", s.duration_ns);
  if (s.flow_out) {
    append_field(out, "bind_id", *s.flow_out);
    out += ", \"flow_out\": true";
  }
  if (s.flow_in) {
    append_field(out, "bind_id", *s.flow_in);
    out += ", \"flow_in\": true";
  }
  out += ", \"args\": ";
  append_args(out, s.args);
  out += '}';
  return out;
}

/// Empty when no series is finite: Perfetto drops a C event without args (§1.6).
std::string counter_event(const CounterSample& c) {
  std::vector<Arg> series;
  for (const auto& [key, value] : c.series) {
    if (std::isfinite(value)) series.push_back({key, value});
  }
  if (series.empty()) return {};
  std::string out = event_start("C");
  append_field(out, "name", c.name);
  append_field(out, "pid", c.pid);
  append_field(out, "tid", c.tid);
  append_time_field(out, "ts", c.ts_ns);
  out += ", \"args\": ";
  append_args(out, series);
  out += '}';
  return out;
}

std::string instant_event(const Instant& i) {
  std::string out = event_start("i");
  append_field(out, "name", i.name);
  append_field(out, "pid", i.pid);
  append_field(out, "tid", i.tid);
  append_time_field(out, "ts", i.ts_ns);
  append_field(out, "s", i.global ? "g" : "p");
  out += ", \"args\": ";
  append_args(out, i.args);
  out += '}';
  return out;
}

/// `{"ph": "s", "id": .., "cat": .., "name": .., "pid": .., "tid": .., "ts": ..}`, an `f` with
/// `"bp": "e"` so that it binds to its enclosing slice (docs/TRACES.md §1.6, "Flow v1").
std::string flow_event(const FlowEvent& f) {
  std::string out = event_start(f.start ? "s" : "f");
  append_field(out, "id", f.id);
  append_field(out, "cat", f.cat);
  append_field(out, "name", f.name);
  append_field(out, "pid", f.pid);
  append_field(out, "tid", f.tid);
  append_time_field(out, "ts", f.ts_ns);
  if (!f.start) append_field(out, "bp", "e");
  out += '}';
  return out;
}

/// A timed event with its sort key. At equal times, flow ends (flow_in) come after every other
/// event: Perfetto's flow tracker reads events in timestamp order and then file order, and drops
/// an end it sees before its start (flow_end_without_start), which happened whenever a receive's
/// rank was lower than its sender's. Counters sort before the rows of their process at the same
/// time (tid 0 in the key only).
struct TimedEvent {
  std::int64_t ts = 0;
  bool flow_end = false;
  std::int64_t pid = 0;
  std::int64_t tid = 0;
  std::string json;
};

std::vector<std::string> sorted_events(const TraceDocument& document) {
  std::vector<TimedEvent> timed;
  timed.reserve(document.slices.size() + document.counters.size() + document.instants.size() +
                document.flows.size());
  for (const Slice& s : document.slices)
    timed.push_back({s.start_ns, s.flow_in.has_value(), s.pid, s.tid, slice_event(s)});
  for (const CounterSample& c : document.counters) {
    std::string json = counter_event(c);
    if (!json.empty()) timed.push_back({c.ts_ns, false, c.pid, 0, std::move(json)});
  }
  for (const Instant& i : document.instants) {
    timed.push_back({i.ts_ns, false, i.pid, i.tid, instant_event(i)});
  }
  // Last in input order: the stable sort keeps a flow event after the slice of its own
  // (ts, pid, tid), as Perfetto's flow tracker needs.
  for (const FlowEvent& f : document.flows) {
    timed.push_back({f.ts_ns, false, f.pid, f.tid, flow_event(f)});
  }
  // Stable: equal keys keep the input order, so the same document gives the same bytes.
  std::stable_sort(timed.begin(), timed.end(), [](const TimedEvent& a, const TimedEvent& b) {
    if (a.ts != b.ts) return a.ts < b.ts;
    if (a.flow_end != b.flow_end) return b.flow_end;
    if (a.pid != b.pid) return a.pid < b.pid;
    return a.tid < b.tid;
  });
  std::vector<std::string> events;
  events.reserve(timed.size());
  for (TimedEvent& e : timed) events.push_back(std::move(e.json));
  return events;
}

/// `, "pg_count": N, "pg_config": [{pg_name, pg_desc, backend_config, pg_size, ranks}, ...]`
/// (docs/TRACES.md §2.7). Member lists hold "ranks", never a bare "rank" key, so HTA's rank regex
/// still finds distributedInfo.rank first.
void append_pg_config(std::string& out, const std::vector<ProcessGroupConfig>& groups) {
  append_field(out, "pg_count", static_cast<std::int64_t>(groups.size()));
  out += ", \"pg_config\": [";
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const ProcessGroupConfig& pg = groups[g];
    if (g > 0) out += ", ";
    out += '{';
    append_key(out, "pg_name");
    append_string(out, pg.pg_name);
    append_field(out, "pg_desc", pg.pg_desc);
    append_field(out, "backend_config", pg.backend_config);
    append_field(out, "pg_size", static_cast<std::int64_t>(pg.ranks.size()));
    out += ", \"ranks\": [";
    for (std::size_t k = 0; k < pg.ranks.size(); ++k) {
      if (k > 0) out += ", ";
      append_integer(out, pg.ranks[k]);
    }
    out += "]}";
  }
  out += ']';
}

/// The header keys in docs/TRACES.md §6.1 order. Every key is followed by ": " so that HTA's rank
/// regex `"rank":\s+(\d+)` finds distributedInfo (§2.8).
std::string header(const TraceDocument& document) {
  std::string out = "{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [],\n";
  if (document.rank) {
    out += "  \"distributedInfo\": {";
    if (document.backend) {
      append_key(out, "backend");
      append_string(out, *document.backend);
      out += ", ";
    }
    out += "\"rank\": " + std::to_string(*document.rank);
    if (document.world_size) out += ", \"world_size\": " + std::to_string(*document.world_size);
    if (!document.pg_config.empty()) append_pg_config(out, document.pg_config);
    if (document.nccl_version) append_field(out, "nccl_version", *document.nccl_version);
    out += "},\n";
  }
  out += "  \"baseTimeNanoseconds\": " + std::to_string(document.base_time_ns) +
         ",\n  \"displayTimeUnit\": \"ns\",\n";
  std::string metadata;
  append_args(metadata, document.metadata);
  out += "  \"otherData\": " + metadata + ",\n";
  out += "  \"metadata\": " + metadata + ",\n";
  return out;
}

/// gzip (RFC 1952) of `data` with zlib's defaults, fed in chunks because zlib counts in 32-bit
/// lengths. The header's mtime stays 0, so the bytes are deterministic too.
std::string gzip(std::string_view data, const std::string& path) {
  z_stream stream{};
  // windowBits 15 + 16 selects the gzip wrapper (zlib manual, deflateInit2); memLevel 8 is the
  // default.
  constexpr int kGzipWindowBits = 15 + 16;
  constexpr int kMemLevel = 8;
  constexpr std::size_t kMaxChunk = std::size_t{1} << 30;
  if (deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, kGzipWindowBits, kMemLevel,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    throw IoError("cannot write '" + path + "': cannot start gzip compression",
                  IoError::Cause::kRuntime);
  }
  std::string out;
  std::vector<char> buffer(std::size_t{1} << 16);
  std::size_t offset = 0;
  int flush = Z_NO_FLUSH;
  while (flush != Z_FINISH) {
    const std::size_t chunk = std::min(data.size() - offset, kMaxChunk);
    // zlib's interface is not const-correct; deflate only reads next_in.
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + offset));
    stream.avail_in = static_cast<uInt>(chunk);
    offset += chunk;
    flush = offset == data.size() ? Z_FINISH : Z_NO_FLUSH;
    do {
      stream.next_out = reinterpret_cast<Bytef*>(buffer.data());
      stream.avail_out = static_cast<uInt>(buffer.size());
      if (deflate(&stream, flush) == Z_STREAM_ERROR) {
        deflateEnd(&stream);
        throw IoError("cannot write '" + path + "': gzip compression failed",
                      IoError::Cause::kRuntime);
      }
      out.append(buffer.data(), buffer.size() - stream.avail_out);
    } while (stream.avail_out == 0);
  }
  deflateEnd(&stream);
  return out;
}

}  // namespace

std::string to_chrome_json(const TraceDocument& document) {
  std::vector<std::string> events;
  for (const ProcessInfo& p : document.processes) {
    events.push_back(metadata_event("process_name", p.pid, nullptr, {{"name", p.name}}));
    events.push_back(
        metadata_event("process_sort_index", p.pid, nullptr, {{"sort_index", p.sort_index}}));
  }
  for (const ThreadInfo& t : document.threads) {
    events.push_back(metadata_event("thread_name", t.pid, &t.tid, {{"name", t.name}}));
    events.push_back(
        metadata_event("thread_sort_index", t.pid, &t.tid, {{"sort_index", t.sort_index}}));
  }
  std::vector<std::string> timed = sorted_events(document);
  events.insert(events.end(), std::make_move_iterator(timed.begin()),
                std::make_move_iterator(timed.end()));

  std::string out = header(document);
  out += "  \"traceEvents\": [";
  for (std::size_t i = 0; i < events.size(); ++i) {
    out += i == 0 ? "\n    " : ",\n    ";
    out += events[i];
  }
  out += "\n  ]\n}\n";
  return out;
}

std::string write_chrome_trace(const std::string& path, const TraceDocument& document,
                               std::int64_t gzip_above_bytes) {
  const std::string json = to_chrome_json(document);
  std::string target = path;
  bool compress = path.ends_with(".gz");
  if (!compress && path != "-" && gzip_above_bytes > 0 &&
      json.size() > static_cast<std::size_t>(gzip_above_bytes)) {
    compress = true;
    target += ".gz";
  }
  if (compress) {
    write_file_atomically(target, gzip(json, target));
  } else {
    write_file_atomically(target, json);
  }
  return target;
}

}  // namespace metron::traces
