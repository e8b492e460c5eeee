// Fuzzes PyTorch's CSV form of schedules (ir::parse_csv): accepted rows print as CSV that parses
// back to the same rows and prints identically (tests/ir/roundtrip_property_test.cc).

#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "metron/ir/action_rows.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace ir = metron::ir;
  using metron::fuzz::require;
  const auto rows =
      metron::fuzz::accept([&] { return ir::parse_csv(metron::fuzz::as_text(data, size)); });
  if (!rows) return 0;
  require(rows->groups.empty(), "parse_csv produced group declarations");
  const std::string csv = ir::format_csv(*rows);
  const ir::ActionRows back = ir::parse_csv(csv, "<canonical>");
  require(back == *rows, "parse_csv(format_csv(rows)) != rows");
  require(ir::format_csv(back) == csv, "format_csv is not a fixed point");
  return 0;
}
