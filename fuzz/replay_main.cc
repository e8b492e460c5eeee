// Replays inputs through a fuzz target's LLVMFuzzerTestOneInput without libFuzzer, so that any
// compiler builds it: the test suite runs every target over its seed corpus and its kept findings
// (fuzz/CMakeLists.txt, tests FuzzReplay.<target>) in the sanitized build, where a finding that
// comes back crashes the test; and then fuzzes it for a few seconds with the random mutator
// (mutator.h, tests FuzzMutate.<target>). Coverage-guided fuzzing needs clang and bench/fuzz.sh.
//
//   fuzz_replay_<target> [--mutate SECONDS [--dict FILE] [--seed N]] PATH...
//       each PATH a file or a folder whose files are replayed in name order; with --mutate, then
//       inputs made from them by random edits for SECONDS (reproducible for one --seed, default
//       1). Exit 0 when every input passed, 2 for bad arguments or a PATH that is missing or
//       holds no input; a failing input aborts (the target's verdict, Note [fuzz verdicts]), and
//       a made one is first saved as fuzz-mutate-crash-<pid> in the current folder.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "mutator.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

// The sanitizers' hook for "the process is about to die of a report" (ASan, UBSan with
// halt_on_error); weak, so that a build without them links.
// NOLINTNEXTLINE(readability-identifier-naming): the sanitizer runtime's own name
extern "C" void __sanitizer_set_death_callback(void (*callback)()) __attribute__((weak));

namespace {

namespace fs = std::filesystem;
using metron::fuzz::Bytes;

// The largest input made, as bench/fuzz.sh's METRON_FUZZ_MAX_LEN default for the long runs.
constexpr std::size_t kMaxLen = 16384;

// The made input under test, for the crash handlers (read only from them).
const Bytes* g_current = nullptr;

// Writes the input under test to fuzz-mutate-crash-<pid>: what a crash leaves to reproduce it
// with (`fuzz_replay_<target> FILE`). Async-signal-safe: open, write, close only.
void save_current() {
  if (g_current == nullptr) return;
  char name[64];
  const int length = std::snprintf(name, sizeof name, "fuzz-mutate-crash-%d", ::getpid());
  if (length <= 0) return;
  const int fd = ::open(name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  const std::uint8_t* p = g_current->data();
  std::size_t left = g_current->size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n <= 0) break;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  ::close(fd);
  static constexpr char kSaved[] = "fuzz_replay: the failing input is saved as ";
  (void)::write(STDERR_FILENO, kSaved, sizeof kSaved - 1);
  (void)::write(STDERR_FILENO, name, static_cast<std::size_t>(length));
  (void)::write(STDERR_FILENO, "\n", 1);
}

extern "C" void on_fatal_signal(int sig) {
  save_current();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void save_on_crash() {
  if (&__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(save_current);
  for (const int sig : {SIGABRT, SIGSEGV, SIGILL, SIGFPE, SIGBUS, SIGTRAP}) {
    std::signal(sig, on_fatal_signal);
  }
  std::set_terminate([] {
    save_current();
    std::abort();
  });
}

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

bool read_bytes(const fs::path& file, Bytes& data) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return false;
  // The harness takes unsigned bytes, as libFuzzer hands them over.
  data.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>{});
  return true;
}

struct Arguments {
  double mutate_seconds = 0;
  std::string dictionary;
  std::uint64_t seed = 1;
  std::vector<std::string> paths;
};

bool parse_arguments(int argc, char** argv, Arguments& out) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const bool has_value = i + 1 < argc;
    char* end = nullptr;
    if (a == "--mutate" && has_value) {
      out.mutate_seconds = std::strtod(argv[++i], &end);
      if (*end != '\0' || !(out.mutate_seconds > 0 && out.mutate_seconds <= 3600)) return false;
    } else if (a == "--dict" && has_value) {
      out.dictionary = argv[++i];
    } else if (a == "--seed" && has_value) {
      out.seed = std::strtoull(argv[++i], &end, 10);
      if (*end != '\0') return false;
    } else if (a.starts_with("--")) {
      return false;
    } else {
      out.paths.emplace_back(a);
    }
  }
  return !out.paths.empty();
}

}  // namespace

int main(int argc, char** argv) {
  Arguments args;
  if (!parse_arguments(argc, argv, args)) {
    std::fprintf(stderr,
                 "usage: %s [--mutate SECONDS [--dict FILE] [--seed N]] PATH...   (files, or "
                 "folders of inputs)\n",
                 argv[0]);
    return 2;
  }
  std::vector<Bytes> seeds;
  for (const std::string& path : args.paths) {
    const std::vector<fs::path> files = inputs_of(path);
    if (files.empty()) {
      std::fprintf(stderr, "%s: %s is missing or holds no input\n", argv[0], path.c_str());
      return 2;
    }
    for (const fs::path& file : files) {
      Bytes data;
      if (!read_bytes(file, data)) {
        std::fprintf(stderr, "%s: cannot read %s\n", argv[0], file.c_str());
        return 2;
      }
      std::fprintf(stderr, "replaying %s (%zu bytes)\n", file.c_str(), data.size());
      LLVMFuzzerTestOneInput(data.data(), data.size());
      seeds.push_back(std::move(data));
    }
  }
  std::printf("%zu inputs replayed, none failed\n", seeds.size());
  if (args.mutate_seconds <= 0) return 0;

  std::vector<Bytes> dictionary;
  if (!args.dictionary.empty()) {
    std::ifstream in(args.dictionary);
    const std::string text(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>{});
    try {
      if (!in.good() && !in.eof()) throw std::runtime_error("cannot read it");
      dictionary = metron::fuzz::parse_dictionary(text);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s: %s: %s\n", argv[0], args.dictionary.c_str(), e.what());
      return 2;
    }
  }
  save_on_crash();
  metron::fuzz::Mutator mutator(std::move(seeds), std::move(dictionary), args.seed, kMaxLen);
  const auto start = std::chrono::steady_clock::now();
  const auto budget = std::chrono::duration<double>(args.mutate_seconds);
  std::size_t made = 0;
  while (std::chrono::steady_clock::now() - start < budget) {
    const Bytes input = mutator.next();
    g_current = &input;
    LLVMFuzzerTestOneInput(input.data(), input.size());
    g_current = nullptr;
    ++made;
  }
  std::printf("%zu inputs made by random edits in %.0f s (seed %llu), none failed\n", made,
              args.mutate_seconds, static_cast<unsigned long long>(args.seed));
  return 0;
}
