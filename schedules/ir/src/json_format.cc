// The JSON form of a graph (Note [graph JSON] in json_format.h).

#include "metron/ir/json_format.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "metron/base/error.h"
#include "metron/base/json_error_text.h"
#include "metron/base/json_layout.h"
#include "metron/base/json_parse.h"
#include "metron/ir/graph_builder.h"

namespace metron::ir {
namespace {

// ordered_json keeps keys in insertion order, which makes the written text canonical, and keeps
// them in document order when reading, so unknown keys are reported in the order they appear.
using Json = nlohmann::ordered_json;

constexpr std::string_view kFormat = "metron-graph";
constexpr std::int64_t kVersion = 1;
constexpr std::array<std::pair<const char*, std::int32_t RankCoords::*>, 5> kCoordKeys{
    {{"tp", &RankCoords::tp},
     {"pp", &RankCoords::pp},
     {"dp", &RankCoords::dp},
     {"cp", &RankCoords::cp},
     {"ep", &RankCoords::ep}}};

template <class Id>
void put_id(Json& out, const char* key, Id id) {
  if (id.valid()) out[key] = id.value();
}

template <class Id>
Json id_list(const std::vector<Id>& ids) {
  Json out = Json::array();
  for (Id id : ids) out.push_back(id.value());
  return out;
}

// Integral doubles are stored as integers so 1e12 reads "1000000000000", not "1000000000000.0";
// every other double is written by nlohmann in shortest round-trip form, so reading it back
// gives the same bits. -0.0 stays a float to keep its sign.
Json number(double x) {
  // Validation rejects non-finite work, so a graph never holds one.
  METRON_ASSERT(std::isfinite(x), "JSON cannot hold a non-finite number");
  const bool fits = x >= -0x1p63 && x < 0x1p63;
  if (fits && std::trunc(x) == x && !(x == 0 && std::signbit(x))) {
    return static_cast<std::int64_t>(x);
  }
  return x;
}

void put_number(Json& out, const char* key, double x) {
  if (x != 0 || std::signbit(x)) out[key] = number(x);
}

void put_layers(Json& out, LayerRange layers) {
  if (layers != LayerRange{}) out["layers"] = Json::array({layers.first, layers.last});
}

Json write_rank(const Rank& rank, std::size_t id) {
  Json out = {{"id", id}};
  if (rank.hardware_queues != Rank{}.hardware_queues) out["hardware_queues"] = rank.hardware_queues;
  if (rank.coords != RankCoords{}) {
    Json& coords = out["coords"];
    for (const auto& [key, member] : kCoordKeys) coords[key] = rank.coords.*member;
  }
  return out;
}

Json write_stream(const Stream& stream, std::size_t id) {
  return {{"id", id}, {"rank", stream.rank.value()}, {"name", stream.name}};
}

Json write_group(const Group& group, std::size_t id) {
  return {{"id", id}, {"name", group.name}, {"ranks", id_list(group.ranks)}};
}

Json write_buffer(const Buffer& buffer, std::size_t id) {
  Json out = {{"id", id}, {"rank", buffer.rank.value()}, {"bytes", buffer.bytes}};
  if (!buffer.name.empty()) out["name"] = buffer.name;
  return out;
}

Json write_overlap(const OverlapPart& part) {
  Json out = {{"phase", to_string(part.phase)}};
  put_id(out, "stage", part.stage);
  put_id(out, "chunk", part.chunk);
  put_id(out, "microbatch", part.microbatch);
  put_layers(out, part.layers);
  return out;
}

Json write_operation(const Operation& o) {
  Json out = {{"name", o.name}, {"kind", to_string(o.kind)}, {"m", o.m}};
  if (o.kind != OperationKind::kElementwise) {
    out["n"] = o.n;
    out["k"] = o.k;
  }
  if (o.kind == OperationKind::kBatchedGemm) out["batch"] = o.batch;
  out["bytes"] = o.bytes;
  if (o.count != 1) out["count"] = o.count;
  out["dtype"] = to_string(o.dtype);
  return out;
}

void write_compute(const TaskOp& op, Json& out) {
  const auto& c = std::get<Compute>(op);
  out["phase"] = to_string(c.phase);
  put_number(out, "flops", c.flops);
  put_number(out, "bytes_moved", c.bytes_moved);
  if (!c.shapes.empty()) out["shapes"] = c.shapes;
  if (!c.cost_key.empty()) out["cost_key"] = c.cost_key;
  if (!c.operations.empty()) {
    Json& list = out["operations"] = Json::array();
    for (const Operation& o : c.operations) list.push_back(write_operation(o));
  }
  if (c.overlapped) out["overlapped"] = write_overlap(*c.overlapped);
}

void write_collective(const TaskOp& op, Json& out) {
  const auto& c = std::get<Collective>(op);
  out["op"] = to_string(c.op);
  out["group"] = c.group.value();
  out["bytes"] = c.bytes;
  if (c.dtype != DType::kFp32) out["dtype"] = to_string(c.dtype);
  put_id(out, "root", c.root);
  out["seq"] = c.seq;
  if (c.count != 1) out["count"] = c.count;
}

template <class P2P>
void write_p2p(const TaskOp& op, Json& out) {
  const auto& p = std::get<P2P>(op);
  out["peer"] = p.peer.value();
  out["bytes"] = p.bytes;
  out["tag"] = p.tag;
  if (p.what != P2PKind::kActivation) out["what"] = to_string(p.what);
}

void write_host_wait(const TaskOp& op, Json& out) {
  out["target"] = std::get<HostWait>(op).target.value();
}

// A wrong type or value at a JSON path; graph_from_json turns it into a ParseError with the
// source, so the small readers below need not carry it around.
struct PathError {
  std::string path;
  std::string what;
};

[[noreturn]] void fail(const std::string& path, std::string what) {
  throw PathError{path, std::move(what)};
}

std::string brief(const Json& value) {
  constexpr std::size_t kMax = 40;
  std::string text = value.dump();
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

std::int64_t read_integer(const Json& v, const std::string& path, std::int64_t lo,
                          std::int64_t hi) {
  if (!v.is_number_integer()) fail(path, "expected an integer, got " + brief(v));
  const bool too_big =
      v.is_number_unsigned() &&
      v.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max());
  const auto x = v.get<std::int64_t>();
  if (too_big || x < lo || x > hi) {
    fail(path, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                   "], got " + brief(v));
  }
  return x;
}

template <class Int>
Int read_int(const Json& v, const std::string& path) {
  using Limits = std::numeric_limits<Int>;
  return static_cast<Int>(read_integer(v, path, Limits::min(), Limits::max()));
}
std::int32_t read_int32(const Json& v, const std::string& path) {
  return read_int<std::int32_t>(v, path);
}
std::int64_t read_int64(const Json& v, const std::string& path) {
  return read_int<std::int64_t>(v, path);
}

template <class Id>
Id read_id(const Json& v, const std::string& path) {
  const auto max = std::numeric_limits<typename Id::rep_type>::max();
  return Id{static_cast<typename Id::rep_type>(read_integer(v, path, 0, max))};
}

double read_double(const Json& v, const std::string& path) {
  if (!v.is_number()) fail(path, "expected a number, got " + brief(v));
  return v.get<double>();
}

std::string read_string(const Json& v, const std::string& path) {
  if (!v.is_string()) fail(path, "expected a string, got " + brief(v));
  return v.get<std::string>();
}

template <class Enum, std::optional<Enum> (*Parse)(std::string_view) noexcept>
Enum read_enum(const Json& v, const std::string& path) {
  const std::string name = read_string(v, path);
  const std::optional<Enum> value = Parse(name);
  if (!value) fail(path, "expected one of " + enum_names<Enum>() + ", got " + brief(v));
  return *value;
}

std::string item_path(const std::string& path, std::size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

void expect_array(const Json& v, const std::string& path) {
  if (!v.is_array()) fail(path, "expected an array, got " + brief(v));
}

// A reader of a JSON array that applies `read` to every element.
template <class Read>
auto list_of(Read read) {
  return [read](const Json& v, const std::string& path) {
    expect_array(v, path);
    std::vector<std::invoke_result_t<Read, const Json&, const std::string&>> out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) out.push_back(read(v[i], item_path(path, i)));
    return out;
  };
}

LayerRange read_layers(const Json& v, const std::string& path) {
  if (!v.is_array() || v.size() != 2) fail(path, "expected [first, last], got " + brief(v));
  return {read_int32(v[0], item_path(path, 0)), read_int32(v[1], item_path(path, 1))};
}

// One JSON object being read: remembers which keys were consumed so that the rest can be
// reported as unknown (a Diagnostics entry, never an error, so newer writers stay readable).
class ObjectReader {
 public:
  ObjectReader(const Json& object, std::string path, Diagnostics* diagnostics)
      : object_(object), path_(std::move(path)), diagnostics_(diagnostics) {
    if (!object_.is_object()) fail(where(), "expected an object, got " + brief(object_));
  }

  [[nodiscard]] std::string path_of(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }

  const Json* find(std::string_view key) {
    const auto it = object_.find(key);
    if (it == object_.end()) return nullptr;
    used_.emplace_back(key);
    return &*it;
  }

  const Json& required(std::string_view key) {
    const Json* value = find(key);
    if (value == nullptr) fail(where(), "missing key \"" + std::string(key) + "\"");
    return *value;
  }

  template <class Read>
  auto get(std::string_view key, Read read) {
    return read(required(key), path_of(key));
  }

  template <class T, class Read>
  T get_or(std::string_view key, T fallback, Read read) {
    const Json* value = find(key);
    return value == nullptr ? fallback : T(read(*value, path_of(key)));
  }

  void finish() const {
    if (diagnostics_ == nullptr) return;
    for (const auto& item : object_.items()) {
      if (std::find(used_.begin(), used_.end(), item.key()) == used_.end()) {
        diagnostics_->add("unknown_key", path_of(item.key()) + ": unknown key");
      }
    }
  }

  [[nodiscard]] Diagnostics* diagnostics() const noexcept { return diagnostics_; }

 private:
  [[nodiscard]] std::string where() const { return path_.empty() ? "top level" : path_; }

  const Json& object_;
  std::string path_;
  Diagnostics* diagnostics_;
  std::vector<std::string> used_;
};

void check_id(ObjectReader& in, std::size_t index) {
  const std::string path = in.path_of("id");
  const std::int64_t id = in.get("id", read_int64);
  if (id != static_cast<std::int64_t>(index)) {
    fail(path,
         "expected " + std::to_string(index) + " (ids are positions), got " + std::to_string(id));
  }
}

Rank read_rank(ObjectReader& in) {
  Rank rank;
  rank.hardware_queues = in.get_or("hardware_queues", rank.hardware_queues, read_int32);
  if (const Json* coords = in.find("coords")) {
    ObjectReader c(*coords, in.path_of("coords"), in.diagnostics());
    for (const auto& [key, member] : kCoordKeys) {
      rank.coords.*member = c.get_or(key, std::int32_t{0}, read_int32);
    }
    c.finish();
  }
  return rank;
}

Stream read_stream(ObjectReader& in) {
  return {.rank = in.get("rank", read_id<RankId>), .name = in.get("name", read_string)};
}

Group read_group(ObjectReader& in) {
  return {.name = in.get("name", read_string), .ranks = in.get("ranks", list_of(read_id<RankId>))};
}

Buffer read_buffer(ObjectReader& in) {
  return {.rank = in.get("rank", read_id<RankId>),
          .bytes = in.get("bytes", read_int64),
          .name = in.get_or("name", std::string(), read_string)};
}

OverlapPart read_overlap(const Json& v, const std::string& path, Diagnostics* diagnostics) {
  ObjectReader in(v, path, diagnostics);
  OverlapPart part;
  part.phase = in.get("phase", read_enum<Phase, parse_phase>);
  part.stage = in.get_or("stage", StageId{}, read_id<StageId>);
  part.chunk = in.get_or("chunk", ChunkId{}, read_id<ChunkId>);
  part.microbatch = in.get_or("microbatch", MicrobatchId{}, read_id<MicrobatchId>);
  part.layers = in.get_or("layers", LayerRange{}, read_layers);
  in.finish();
  return part;
}

Operation read_operation(const Json& v, const std::string& path, Diagnostics* diagnostics) {
  ObjectReader in(v, path, diagnostics);
  Operation o;
  o.name = in.get("name", read_string);
  o.kind = in.get("kind", read_enum<OperationKind, parse_operation_kind>);
  o.m = in.get("m", read_int64);
  o.n = in.get_or("n", std::int64_t{0}, read_int64);
  o.k = in.get_or("k", std::int64_t{0}, read_int64);
  o.batch = in.get_or("batch", std::int64_t{1}, read_int64);
  o.bytes = in.get_or("bytes", std::int64_t{0}, read_int64);
  o.count = in.get_or("count", std::int32_t{1}, read_int32);
  o.dtype = in.get_or("dtype", DType::kBf16, read_enum<DType, parse_dtype>);
  in.finish();
  return o;
}

TaskOp read_compute(ObjectReader& in) {
  Compute c;
  c.phase = in.get("phase", read_enum<Phase, parse_phase>);
  c.flops = in.get_or("flops", 0.0, read_double);
  c.bytes_moved = in.get_or("bytes_moved", 0.0, read_double);
  c.shapes = in.get_or("shapes", c.shapes, list_of(list_of(read_int64)));
  c.cost_key = in.get_or("cost_key", std::string(), read_string);
  if (const Json* list = in.find("operations")) {
    const std::string path = in.path_of("operations");
    expect_array(*list, path);
    for (std::size_t i = 0; i < list->size(); ++i) {
      c.operations.push_back(read_operation((*list)[i], item_path(path, i), in.diagnostics()));
    }
  }
  if (const Json* part = in.find("overlapped")) {
    c.overlapped = read_overlap(*part, in.path_of("overlapped"), in.diagnostics());
  }
  return c;
}

TaskOp read_collective(ObjectReader& in) {
  Collective c;
  c.op = in.get("op", read_enum<CollectiveOp, parse_collective_op>);
  c.group = in.get("group", read_id<GroupId>);
  c.bytes = in.get("bytes", read_int64);
  c.dtype = in.get_or("dtype", DType::kFp32, read_enum<DType, parse_dtype>);
  c.root = in.get_or("root", RankId{}, read_id<RankId>);
  c.seq = in.get("seq", read_int64);
  c.count = in.get_or("count", std::int32_t{1}, read_int32);
  return c;
}

template <class P2P>
TaskOp read_p2p(ObjectReader& in) {
  P2P p;
  p.peer = in.get("peer", read_id<RankId>);
  p.bytes = in.get("bytes", read_int64);
  p.tag = in.get("tag", read_int64);
  p.what = in.get_or("what", P2PKind::kActivation, read_enum<P2PKind, parse_p2p_kind>);
  return p;
}

TaskOp read_host_wait(ObjectReader& in) { return HostWait{in.get("target", read_id<TaskId>)}; }

// The kind-specific part of a task, one writer and one reader per TaskKind (indexed by it).
struct KindCodec {
  void (*write)(const TaskOp& op, Json& out);
  TaskOp (*read)(ObjectReader& in);
};

constexpr std::array<KindCodec, std::variant_size_v<TaskOp>> kKindCodecs{{
    {write_compute, read_compute},
    {write_collective, read_collective},
    {write_p2p<Send>, read_p2p<Send>},
    {write_p2p<Recv>, read_p2p<Recv>},
    {write_host_wait, read_host_wait},
}};

const KindCodec& codec(TaskKind kind) { return kKindCodecs[static_cast<std::size_t>(kind)]; }

Json write_task(const Task& task, std::size_t id) {
  Json out = {{"id", id}, {"rank", task.rank.value()}};
  put_id(out, "stream", task.stream);
  out["kind"] = to_string(task.kind());
  codec(task.kind()).write(task.op, out);
  put_id(out, "stage", task.stage);
  put_id(out, "chunk", task.chunk);
  put_id(out, "microbatch", task.microbatch);
  put_id(out, "bucket", task.bucket);
  put_layers(out, task.layers);
  if (!task.label.empty()) out["label"] = task.label;
  if (!task.deps.empty()) out["deps"] = id_list(task.deps);
  if (!task.allocates.empty()) out["allocates"] = id_list(task.allocates);
  if (!task.uses.empty()) out["uses"] = id_list(task.uses);
  return out;
}

Task read_task(ObjectReader& in) {
  Task t;
  t.rank = in.get("rank", read_id<RankId>);
  t.stream = in.get_or("stream", StreamId{}, read_id<StreamId>);
  t.op = codec(in.get("kind", read_enum<TaskKind, parse_task_kind>)).read(in);
  t.stage = in.get_or("stage", StageId{}, read_id<StageId>);
  t.chunk = in.get_or("chunk", ChunkId{}, read_id<ChunkId>);
  t.microbatch = in.get_or("microbatch", MicrobatchId{}, read_id<MicrobatchId>);
  t.bucket = in.get_or("bucket", BucketId{}, read_id<BucketId>);
  t.layers = in.get_or("layers", LayerRange{}, read_layers);
  t.label = in.get_or("label", std::string(), read_string);
  t.deps = in.get_or("deps", t.deps, list_of(read_id<TaskId>));
  t.allocates = in.get_or("allocates", t.allocates, list_of(read_id<BufferId>));
  t.uses = in.get_or("uses", t.uses, list_of(read_id<BufferId>));
  return t;
}

template <class T>
Json write_entities(const std::vector<T>& items, Json (*write)(const T&, std::size_t)) {
  Json out = Json::array();
  for (std::size_t i = 0; i < items.size(); ++i) out.push_back(write(items[i], i));
  return out;
}

// Reads an optional top-level array of entities whose "id" must equal their position.
template <class T>
std::vector<T> read_entities(ObjectReader& top, std::string_view key, T (*read)(ObjectReader&)) {
  std::vector<T> out;
  const Json* items = top.find(key);
  if (items == nullptr) return out;
  const std::string path = top.path_of(key);
  expect_array(*items, path);
  out.reserve(items->size());
  for (std::size_t i = 0; i < items->size(); ++i) {
    ObjectReader in((*items)[i], item_path(path, i), top.diagnostics());
    check_id(in, i);
    out.push_back(read(in));
    in.finish();
  }
  return out;
}

void check_header(ObjectReader& top) {
  const std::string format = top.get("format", read_string);
  if (format != kFormat) {
    fail("format", "expected \"" + std::string(kFormat) + "\", got \"" + format + "\"");
  }
  const std::int64_t version = top.get("version", read_int64);
  if (version != kVersion) {
    fail("version", "expected " + std::to_string(kVersion) + ", got " + std::to_string(version));
  }
}

GraphData read_graph_data(const Json& root, Diagnostics* diagnostics) {
  ObjectReader top(root, "", diagnostics);
  check_header(top);
  GraphData data;
  data.ranks = read_entities(top, "ranks", read_rank);
  data.streams = read_entities(top, "streams", read_stream);
  data.groups = read_entities(top, "groups", read_group);
  data.buffers = read_entities(top, "buffers", read_buffer);
  data.tasks = read_entities(top, "tasks", read_task);
  data.issue_order = top.get_or("issue_order", data.issue_order, list_of(list_of(read_id<TaskId>)));
  top.finish();
  return data;
}

Json parse(std::string_view text, const std::string& source) {
  return parse_json_document<Json>(text, source);
}

}  // namespace

std::string to_json(const Graph& graph) {
  const GraphData& data = graph.data();
  Json order = Json::array();
  for (const auto& rank_order : data.issue_order) order.push_back(id_list(rank_order));
  const Json root = {{"format", kFormat},
                     {"version", kVersion},
                     {"ranks", write_entities(data.ranks, write_rank)},
                     {"streams", write_entities(data.streams, write_stream)},
                     {"groups", write_entities(data.groups, write_group)},
                     {"buffers", write_entities(data.buffers, write_buffer)},
                     {"tasks", write_entities(data.tasks, write_task)},
                     {"issue_order", std::move(order)}};
  try {
    return dump_one_entry_per_line(root);
  } catch (const Json::type_error& e) {
    // Only invalid UTF-8 in a name or label gets here.
    throw InvalidGraph({std::string("cannot write JSON: ") + short_json_reason(e.what())});
  }
}

Graph graph_from_json(std::string_view text, const std::string& source, Diagnostics* diagnostics) {
  const Json root = parse(text, source);
  GraphData data;
  try {
    data = read_graph_data(root, diagnostics);
  } catch (const PathError& e) {
    throw ParseError(source, 0, 0, e.path + ": " + e.what);
  }
  return GraphBuilder(std::move(data)).build();
}

}  // namespace metron::ir
