// Human descriptions of tasks for error messages: they name rank, stage and microbatch
// (docs/STYLE.md, Errors §3) and must never index out of range, because validation describes broken
// graphs too.

#include <fmt/format.h>

#include <string>

#include "metron/ir/graph.h"

namespace metron::ir {
namespace {

template <class Id>
bool in_range(Id id, std::size_t size) {
  return id.valid() && id.index() < size;
}

std::string tags_of(const Task& t) {
  std::string out = fmt::format("rank {}", t.rank.value());
  if (t.stage.valid()) out += fmt::format(", stage {}", t.stage.value());
  if (t.chunk.valid()) out += fmt::format(", chunk {}", t.chunk.value());
  if (t.microbatch.valid()) out += fmt::format(", microbatch {}", t.microbatch.value());
  if (t.bucket.valid()) out += fmt::format(", bucket {}", t.bucket.value());
  return out;
}

std::string group_name(const GraphData& data, GroupId id) {
  if (in_range(id, data.groups.size())) return fmt::format("\"{}\"", data.groups[id.index()].name);
  return fmt::format("#{}", id.value());
}

std::string what_of(const GraphData& data, const Task& t) {
  struct Visitor {
    const GraphData& data;
    std::string operator()(const Compute& c) const {
      if (!c.overlapped) return std::string(to_string(c.phase));
      const OverlapPart& o = *c.overlapped;
      return fmt::format("{} overlapped with {} of stage {} microbatch {}", to_string(c.phase),
                         to_string(o.phase), o.stage.value(), o.microbatch.value());
    }
    std::string operator()(const Collective& c) const {
      return fmt::format("{} of {} bytes on group {} (seq {})", to_string(c.op), c.bytes,
                         group_name(data, c.group), c.seq);
    }
    std::string operator()(const Send& s) const {
      return fmt::format("send of {} {} bytes to rank {} (tag {})", to_string(s.what), s.bytes,
                         s.peer.value(), s.tag);
    }
    std::string operator()(const Recv& r) const {
      return fmt::format("receive of {} {} bytes from rank {} (tag {})", to_string(r.what), r.bytes,
                         r.peer.value(), r.tag);
    }
    std::string operator()(const HostWait& w) const {
      return fmt::format("host wait for task {}", w.target.value());
    }
  };
  return std::visit(Visitor{data}, t.op);
}

}  // namespace

std::string describe_task(const GraphData& data, TaskId id) {
  if (!in_range(id, data.tasks.size())) return fmt::format("task {} (no such task)", id.value());
  const Task& t = data.tasks[id.index()];
  std::string out = fmt::format("task {} ({}): {}", id.value(), tags_of(t), what_of(data, t));
  if (in_range(t.stream, data.streams.size())) {
    out += fmt::format(" on stream \"{}\"", data.streams[t.stream.index()].name);
  } else if (t.stream.valid()) {
    out += fmt::format(" on stream #{}", t.stream.value());
  }
  if (!t.label.empty()) out += fmt::format(" [{}]", t.label);
  return out;
}

}  // namespace metron::ir
