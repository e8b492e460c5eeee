// Replays inputs through a fuzz target's LLVMFuzzerTestOneInput without libFuzzer, so that any
// compiler builds it: the test suite runs every target over its seed corpus and its kept findings
// (fuzz/CMakeLists.txt, tests FuzzReplay.<target>) in the sanitized build, where a finding that
// comes back crashes the test. Fuzzing itself (new inputs) needs clang and bench/fuzz.sh.
//
//   fuzz_replay_<target> PATH...    each PATH a file or a folder whose files are replayed in name
//                                   order; exit 0 when every input passed, 2 when a PATH is
//                                   missing or holds no input; a failing input aborts (the
//                                   target's verdict, Note [fuzz verdicts])

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

// The files PATH names: itself, or a folder's regular files in name order (deterministic runs).
std::vector<fs::path> inputs_of(const fs::path& path) {
  std::error_code error;
  if (!fs::is_directory(path, error))
    return fs::is_regular_file(path, error) ? std::vector{path} : std::vector<fs::path>{};
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(path, error)) {
    if (entry.is_regular_file(error)) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

bool replay(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return false;
  // The harness takes unsigned bytes, as libFuzzer hands them over.
  std::vector<std::uint8_t> data(std::istreambuf_iterator<char>(in),
                                 std::istreambuf_iterator<char>{});
  std::fprintf(stderr, "replaying %s (%zu bytes)\n", file.c_str(), data.size());
  LLVMFuzzerTestOneInput(data.data(), data.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PATH...   (files, or folders of inputs)\n", argv[0]);
    return 2;
  }
  std::size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    const std::vector<fs::path> files = inputs_of(argv[i]);
    if (files.empty()) {
      std::fprintf(stderr, "%s: %s is missing or holds no input\n", argv[0], argv[i]);
      return 2;
    }
    for (const fs::path& file : files) {
      if (!replay(file)) {
        std::fprintf(stderr, "%s: cannot read %s\n", argv[0], file.c_str());
        return 2;
      }
      ++replayed;
    }
  }
  std::printf("%zu inputs replayed, none failed\n", replayed);
  return 0;
}
