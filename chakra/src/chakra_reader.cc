// Reading Chakra streams with protobuf's own delimited-message parser, so the framing is checked
// against the library that defines it rather than against our writer (docs/TRACES.md §3.2).

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/unknown_field_set.h>
#include <google/protobuf/util/delimited_message_util.h>

#include <array>
#include <climits>
#include <string>

#include "decode.h"
#include "et_def.pb.h"
#include "metron/base/error.h"
#include "metron/base/file_io.h"
#include "metron/chakra/chakra_trace.h"

namespace metron::chakra {
namespace detail {
namespace {

namespace pb = ::ChakraProtoMsg;

/// The oneof case field numbers of the full schema (docs/TRACES.md §3.1): a case metron's subset
/// does not declare arrives as an unknown field with one of these numbers.
constexpr std::int32_t kFirstCase = 3;
constexpr std::int32_t kLastCase = 32;

std::int32_t unknown_case(const google::protobuf::Message& message) {
  const google::protobuf::UnknownFieldSet& unknown =
      message.GetReflection()->GetUnknownFields(message);
  for (int i = 0; i < unknown.field_count(); ++i) {
    const int number = unknown.field(i).number();
    if (number >= kFirstCase && number <= kLastCase) return number;
  }
  return 0;
}

Attribute to_attribute(const pb::AttributeProto& a) {
  Attribute out{.name = a.name(), .value_field = 0, .value = {}};
  switch (a.value_case()) {
    case pb::AttributeProto::kInt32Val:
      out.value = a.int32_val();
      break;
    case pb::AttributeProto::kInt64Val:
      out.value = a.int64_val();
      break;
    case pb::AttributeProto::kUint64Val:
      out.value = a.uint64_val();
      break;
    case pb::AttributeProto::kBoolVal:
      out.value = a.bool_val();
      break;
    case pb::AttributeProto::kStringVal:
      out.value = a.string_val();
      break;
    case pb::AttributeProto::kBoolList:
      out.value = std::vector<bool>(a.bool_list().values().begin(), a.bool_list().values().end());
      break;
    case pb::AttributeProto::VALUE_NOT_SET:
      out.value_field = unknown_case(a);
      return out;
  }
  out.value_field = static_cast<std::int32_t>(a.value_case());
  return out;
}

std::vector<Attribute> to_attributes(
    const google::protobuf::RepeatedPtrField<pb::AttributeProto>& attrs) {
  std::vector<Attribute> out;
  out.reserve(static_cast<std::size_t>(attrs.size()));
  for (const pb::AttributeProto& a : attrs) out.push_back(to_attribute(a));
  return out;
}

Node to_node(const pb::Node& n) {
  return Node{.id = n.id(),
              .name = n.name(),
              .type = static_cast<NodeType>(n.type()),
              .ctrl_deps = {n.ctrl_deps().begin(), n.ctrl_deps().end()},
              .data_deps = {n.data_deps().begin(), n.data_deps().end()},
              .start_time_micros = n.start_time_micros(),
              .duration_micros = n.duration_micros(),
              .attrs = to_attributes(n.attr())};
}

}  // namespace

std::string case_name(std::int32_t field) {
  // Field numbers 3..32 alternate scalar and list forms of one type (docs/TRACES.md §3.1).
  static constexpr std::array<const char*, 15> kTypes = {
      "double",  "float",   "int32",    "int64",    "uint32", "uint64", "sint32", "sint64",
      "fixed32", "fixed64", "sfixed32", "sfixed64", "bool",   "string", "bytes"};
  if (field < kFirstCase || field > kLastCase) return "case " + std::to_string(field);
  const auto index = static_cast<std::size_t>((field - kFirstCase) / 2);
  return std::string(kTypes[index]) + ((field - kFirstCase) % 2 == 0 ? "_val" : "_list");
}

Decoded decode_stream(std::string_view bytes) {
  Decoded out;
  if (bytes.size() > static_cast<std::size_t>(INT_MAX)) {
    out.error = "the file is larger than protobuf's 2 GiB stream limit";
    return out;
  }
  google::protobuf::io::ArrayInputStream in(bytes.data(), static_cast<int>(bytes.size()));
  for (std::size_t index = 0;; ++index) {
    const std::int64_t offset = in.ByteCount();
    bool clean_eof = false;
    pb::GlobalMetadata meta;
    pb::Node node;
    google::protobuf::Message* message = index == 0
                                             ? static_cast<google::protobuf::Message*>(&meta)
                                             : static_cast<google::protobuf::Message*>(&node);
    if (!google::protobuf::util::ParseDelimitedFromZeroCopyStream(message, &in, &clean_eof)) {
      if (clean_eof && index == 0) out.error = "the file is empty; expected a GlobalMetadata";
      if (!clean_eof && index == 0) {
        out.error =
            "the first message does not decode as a GlobalMetadata (the file is truncated or "
            "corrupt, or starts with another message)";
      } else if (!clean_eof) {
        out.error = "message " + std::to_string(index) + " at byte " + std::to_string(offset) +
                    " does not decode (a truncated or corrupt length-delimited message)";
      }
      return out;
    }
    // Chakra's Python reader takes a length of 0 as the end of the file (docs/TRACES.md §3.2).
    if (message->ByteSizeLong() == 0) {
      out.problems.push_back("message " + std::to_string(index) + " at byte " +
                             std::to_string(offset) +
                             " is empty; Chakra's Python reader stops at a zero length");
    }
    if (index == 0) {
      // A Node read as a GlobalMetadata keeps its id, type, ... as unknown fields.
      if (!meta.GetReflection()->GetUnknownFields(meta).empty()) {
        out.problems.push_back("the first message is not a GlobalMetadata");
      } else if (meta.version().empty()) {
        out.problems.push_back("the GlobalMetadata has no version");
      }
      out.trace.version = meta.version();
      out.trace.metadata = to_attributes(meta.attr());
    } else {
      out.trace.nodes.push_back(to_node(node));
    }
  }
}

}  // namespace detail

std::string to_string(NodeType type) {
  static constexpr std::array<const char*, 8> kNames = {
      "INVALID_NODE", "METADATA_NODE",  "MEM_LOAD_NODE",  "MEM_STORE_NODE",
      "COMP_NODE",    "COMM_SEND_NODE", "COMM_RECV_NODE", "COMM_COLL_NODE"};
  const auto n = static_cast<std::int32_t>(type);
  if (n < 0 || n >= static_cast<std::int32_t>(kNames.size())) {
    return "UNKNOWN(" + std::to_string(n) + ")";
  }
  return kNames[static_cast<std::size_t>(n)];
}

std::string to_string(CommType type) {
  static constexpr std::array<const char*, 10> kNames = {
      "ALL_REDUCE", "REDUCE",         "ALL_GATHER",           "GATHER", "SCATTER", "BROADCAST",
      "ALL_TO_ALL", "REDUCE_SCATTER", "REDUCE_SCATTER_BLOCK", "BARRIER"};
  const auto n = static_cast<std::int32_t>(type);
  if (n < 0 || n >= static_cast<std::int32_t>(kNames.size())) {
    return "UNKNOWN(" + std::to_string(n) + ")";
  }
  return kNames[static_cast<std::size_t>(n)];
}

const Attribute* Node::find(std::string_view attr_name) const {
  for (const Attribute& a : attrs) {
    if (a.name == attr_name) return &a;
  }
  return nullptr;
}

Trace read_chakra_trace(const std::string& path) {
  detail::Decoded decoded = detail::decode_stream(read_file(path));
  if (decoded.error) throw ParseError(path, 0, 0, *decoded.error);
  return std::move(decoded.trace);
}

}  // namespace metron::chakra
