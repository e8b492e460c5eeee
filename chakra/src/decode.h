#pragma once
// Decoding a Chakra stream into the plain structs of metron/chakra/chakra_trace.h, shared by the
// reader (which throws at the first undecodable message) and the checker (which reports it with
// everything else it finds).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "metron/chakra/chakra_trace.h"

namespace metron::chakra::detail {

struct Decoded {
  Trace trace;
  /// Why decoding stopped before the end of the stream; nullopt when it reached the end.
  std::optional<std::string> error;
  /// Rules broken by messages that did decode: an empty message, a first message that is not a
  /// GlobalMetadata or has no version (docs/TRACES.md §3.2, §4.4).
  std::vector<std::string> problems;
};

/// Decodes every varint32-delimited message of `bytes` (docs/TRACES.md §3.2), the first as a
/// GlobalMetadata and the rest as Nodes, as far as the stream decodes.
Decoded decode_stream(std::string_view bytes);

/// The name of AttributeProto's oneof case with field number `field` ("int64_val"), or
/// "case <n>" for a number outside the oneof.
std::string case_name(std::int32_t field);

}  // namespace metron::chakra::detail
