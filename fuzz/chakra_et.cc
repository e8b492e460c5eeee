// Fuzzes the Chakra execution-trace checker (chakra::check_chakra_directory, docs/TRACES.md §4.4),
// which decodes untrusted .et files with protobuf and checks what ASTRA-sim reads: any bytes as
// rank 0's file must come back as a list of violations, never as a crash. The comm-group JSON
// beside it is fixed, so that the group checks run too.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <ios>
#include <string>

#include "fuzz_support.h"
#include "metron/base/file_io.h"
#include "metron/chakra/chakra_trace.h"

namespace {

/// A folder of this process's own (libFuzzer may run several processes at once).
const std::filesystem::path& work_dir() {
  static const std::filesystem::path kDir = [] {
    std::filesystem::path d = std::filesystem::temp_directory_path() /
                              ("metron-fuzz-chakra-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    metron::write_file_atomically((d / "metron.comm_group.json").string(),
                                  R"({"1": [0], "2": [0], "3": [0], "4": [0]})");
    return d;
  }();
  return kDir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::filesystem::path& dir = work_dir();
  {
    // A plain write: the atomic one syncs to disk, which would cost most of each execution.
    std::ofstream out(dir / "metron.0.et", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  (void)metron::fuzz::accept([&] { return metron::chakra::check_chakra_directory(dir.string()); });
  return 0;
}
