#include "metron/base/file_io.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "metron/base/error.h"
#include "metron/base/temporary_file_guard.h"
#include "support/child_process.h"

namespace metron {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using ::testing::ThrowsMessage;

class FileIo : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("metron-file-io-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  /// The names in `folder`, so a test can see that no temporary was left.
  static std::vector<std::string> names_in(const fs::path& folder) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(folder)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }
  fs::path dir_;
};

TEST_F(FileIo, WritesThenReadsBackTheSameBytes) {
  const std::string path = (dir_ / "out.txt").string();
  const std::string content("line 1\nbinary \0 byte\n", 21);
  write_file_atomically(path, content);
  EXPECT_EQ(read_file(path), content);
}

TEST_F(FileIo, ReplacesAnExistingFileAndLeavesNoTemporaryBehind) {
  const std::string path = (dir_ / "out.txt").string();
  write_file_atomically(path, "old");
  write_file_atomically(path, "new");
  EXPECT_EQ(read_file(path), "new");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator{}), 1);
}

TEST_F(FileIo, FailedWriteThrowsIoErrorAndLeavesNothing) {
  const std::string path = (dir_ / "missing-folder" / "out.txt").string();
  EXPECT_THAT([&] { write_file_atomically(path, "x"); },
              ThrowsMessage<IoError>(HasSubstr("cannot write '" + path + "'")));
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(FileIo, MissingInputIsAnInvalidConfigNamingThePath) {
  const std::string path = (dir_ / "nope.json").string();
  EXPECT_THAT([&] { (void)read_file(path); },
              ThrowsMessage<InvalidConfig>(
                  HasSubstr("cannot read '" + path + "': No such file or directory")));
}

TEST_F(FileIo, ReadingADirectoryIsRejected) {
  EXPECT_THAT([&] { (void)read_file(dir_.string()); },
              ThrowsMessage<InvalidConfig>(HasSubstr("it is a directory; expected a file")));
}

// ---- reading: a limit on every input (issue 14) ----------------------------------------------

TEST_F(FileIo, ReadAcceptsAFileOfExactlyTheLimit) {
  write_file_atomically(path("ten.txt"), "0123456789");
  EXPECT_EQ(read_file(path("ten.txt"), 10), "0123456789");
}

TEST_F(FileIo, ReadRefusesAFileOverTheLimitNamingPathAndLimit) {
  write_file_atomically(path("eleven.txt"), "0123456789A");
  EXPECT_THAT([&] { (void)read_file(path("eleven.txt"), 10); },
              ThrowsMessage<InvalidConfig>(
                  "cannot read '" + path("eleven.txt") +
                  "': the input is larger than the limit of 10 bytes on one input; expected at "
                  "most 10 bytes"));
}

TEST_F(FileIo, ReadStopsAnEndlessDeviceAtTheLimit) {
  EXPECT_THAT([&] { (void)read_file("/dev/zero", std::size_t{1} << 20); },
              ThrowsMessage<InvalidConfig>(
                  StartsWith("cannot read '/dev/zero': the input is larger than the limit of "
                             "1 MiB on one input; expected at most 1048576 bytes")));
}

TEST_F(FileIo, ReadLimitsStandardInputToo) {
  write_file_atomically(path("in.txt"), "more than four bytes");
  const int saved = ::dup(STDIN_FILENO);
  const int file = ::open(path("in.txt").c_str(), O_RDONLY);
  ASSERT_GE(saved, 0);
  ASSERT_GE(file, 0);
  ::dup2(file, STDIN_FILENO);
  ::close(file);
  std::string message;
  try {
    (void)read_file("-", 4);
  } catch (const InvalidConfig& e) {
    message = e.what();
  }
  ::dup2(saved, STDIN_FILENO);
  ::close(saved);
  EXPECT_THAT(message, StartsWith("cannot read standard input: the input is larger than the limit "
                                  "of 4 bytes"));
}

TEST_F(FileIo, TheDefaultLimitIsOneGibibyte) {
  EXPECT_EQ(kMaxInputBytes, std::size_t{1} << 30);
  EXPECT_EQ(format_byte_count(kMaxInputBytes), "1 GiB");
  EXPECT_EQ(format_byte_count(std::size_t{3} << 20), "3 MiB");
  EXPECT_EQ(format_byte_count(2048), "2 KiB");
  EXPECT_EQ(format_byte_count(1000), "1000 bytes");
  EXPECT_EQ(format_byte_count(1), "1 byte");
}

// ---- writing: special files, links, several outputs (issue 14) -------------------------------

TEST_F(FileIo, WriteThroughASymlinkKeepsTheLinkAndReplacesItsTarget) {
  fs::create_directories(dir_ / "real");
  write_file_atomically(path("real/target.txt"), "old");
  fs::create_symlink("real/target.txt", dir_ / "link.txt");
  write_file_atomically(path("link.txt"), "new");
  EXPECT_TRUE(fs::is_symlink(dir_ / "link.txt"));
  EXPECT_EQ(fs::read_symlink(dir_ / "link.txt"), fs::path("real/target.txt"));
  EXPECT_EQ(read_file(path("real/target.txt")), "new");
  // The temporary went beside the target and was renamed over it: nothing else is left.
  EXPECT_EQ(names_in(dir_), (std::vector<std::string>{"link.txt", "real"}));
  EXPECT_EQ(names_in(dir_ / "real"), (std::vector<std::string>{"target.txt"}));
}

TEST_F(FileIo, WriteThroughAChainOfLinksAndADanglingLinkCreatesTheTarget) {
  fs::create_symlink("middle", dir_ / "first");
  fs::create_symlink(dir_ / "new.txt", dir_ / "middle");
  write_file_atomically(path("first"), "made");
  EXPECT_TRUE(fs::is_symlink(dir_ / "first"));
  EXPECT_TRUE(fs::is_symlink(dir_ / "middle"));
  EXPECT_EQ(read_file(path("new.txt")), "made");
}

TEST_F(FileIo, ReplacingAFileKeepsItsPermissions) {
  write_file_atomically(path("private.txt"), "old");
  fs::permissions(path("private.txt"), fs::perms::owner_read | fs::perms::owner_write);
  write_file_atomically(path("private.txt"), "new");
  EXPECT_EQ(fs::status(path("private.txt")).permissions(),
            fs::perms::owner_read | fs::perms::owner_write);
}

TEST_F(FileIo, WriteToDevNullIsWrittenDirectlyAndLeavesTheDevice) {
  // Through a link of our own: were the device replaced, the link would be, not /dev/null.
  fs::create_symlink("/dev/null", dir_ / "null");
  write_file_atomically(path("null"), "discarded");
  write_file_atomically("/dev/null", "discarded");
  EXPECT_TRUE(fs::is_symlink(dir_ / "null"));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_EQ(names_in(dir_), (std::vector<std::string>{"null"}));
}

TEST_F(FileIo, WriteToAFullDeviceReportsNoSpaceNamingThePath) {
  fs::create_symlink("/dev/full", dir_ / "full");
  EXPECT_THAT(
      [&] { write_file_atomically(path("full"), "x"); },
      ThrowsMessage<IoError>("cannot write '" + path("full") + "': No space left on device"));
  EXPECT_TRUE(fs::is_symlink(dir_ / "full"));
  EXPECT_TRUE(fs::is_character_file("/dev/full"));
  EXPECT_EQ(names_in(dir_), (std::vector<std::string>{"full"}));
}

TEST_F(FileIo, WriteToAFifoReachesItsReader) {
  ASSERT_EQ(::mkfifo(path("pipe").c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] { received = read_file(path("pipe")); });
  write_file_atomically(path("pipe"), "through the pipe");
  reader.join();
  EXPECT_EQ(received, "through the pipe");
  EXPECT_TRUE(fs::is_fifo(dir_ / "pipe"));
}

TEST_F(FileIo, ADirectoryGivenAsTheOutputIsRefused) {
  fs::create_directories(dir_ / "folder");
  EXPECT_THAT([&] { write_file_atomically(path("folder"), "x"); },
              ThrowsMessage<IoError>("cannot write '" + path("folder") +
                                     "': it is a directory; expected a file path"));
  EXPECT_TRUE(fs::is_empty(dir_ / "folder"));
}

// check_writable says before a run what the write after it would say, and writes nothing.
TEST_F(FileIo, CheckWritableRefusesWhatTheWriteWouldWithTheSameMessage) {
  write_file_atomically(path("a.txt"), "a");
  fs::create_directories(dir_ / "folder");
  std::vector<std::string> bad = {path("missing/out.txt"), path("folder"), path("a.txt/x")};
  if (::geteuid() != 0) {  // root writes into any folder
    fs::create_directories(dir_ / "locked");
    fs::permissions(dir_ / "locked", fs::perms::owner_read | fs::perms::owner_exec);
    bad.push_back(path("locked/out.txt"));
  }
  for (const std::string& p : bad) {
    SCOPED_TRACE(p);
    std::string written;
    try {
      write_file_atomically(p, "x");
      ADD_FAILURE() << "the write succeeded";
    } catch (const IoError& e) {
      written = e.what();
    }
    EXPECT_THAT([&] { check_writable(p); }, ThrowsMessage<IoError>(written));
  }
  if (fs::exists(dir_ / "locked")) fs::permissions(dir_ / "locked", fs::perms::owner_all);
}

TEST_F(FileIo, CheckWritableAcceptsWhatTheWriteAcceptsAndCreatesNothing) {
  write_file_atomically(path("existing.txt"), "old");
  fs::create_symlink(dir_ / "target-to-be", dir_ / "dangling");
  const std::vector<std::string> before = names_in(dir_);
  for (const std::string& p : {path("new.txt"), path("existing.txt"), path("dangling"),
                               std::string("/dev/null"), std::string("-")}) {
    SCOPED_TRACE(p);
    EXPECT_NO_THROW(check_writable(p));
  }
  EXPECT_EQ(names_in(dir_), before);
  EXPECT_EQ(read_file(path("existing.txt")), "old");
}

TEST_F(FileIo, AWriteErrorIsTheUsersError) {
  try {
    write_file_atomically(path("missing/out.txt"), "x");
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_TRUE(e.is_input_error());  // exit 2, like any other bad path the user gave
  }
}

TEST_F(FileIo, SeveralOutputsLeaveNothingWhenOneIsUnwritable) {
  write_file_atomically(path("a.txt"), "old a");
  EXPECT_THAT(
      [&] {
        write_files_atomically(
            {{path("a.txt"), "new a"}, {path("b.txt"), "new b"}, {path("missing/c.txt"), "new c"}});
      },
      ThrowsMessage<IoError>(StartsWith("cannot write '" + path("missing/c.txt") + "'")));
  EXPECT_EQ(read_file(path("a.txt")), "old a");
  EXPECT_EQ(names_in(dir_), (std::vector<std::string>{"a.txt"}));
}

TEST_F(FileIo, SeveralOutputsLeaveNoTemporaryWhenADeviceFails) {
  fs::create_symlink("/dev/full", dir_ / "full");
  EXPECT_THAT(
      [&] {
        write_files_atomically({{path("a.txt"), "a"}, {path("full"), "x"}});
      },
      ThrowsMessage<IoError>(HasSubstr("No space left on device")));
  EXPECT_EQ(names_in(dir_), (std::vector<std::string>{"full"}));
}

TEST_F(FileIo, SeveralOutputsRefuseTwoOutputsOfOneFile) {
  EXPECT_THAT(
      [&] {
        write_files_atomically({{path("a.txt"), "1"}, {path("a.txt"), "2"}});
      },
      ThrowsMessage<InvalidConfig>("two outputs are written to '" + path("a.txt") +
                                   "'; expected a different path for each"));
  fs::create_symlink("a.txt", dir_ / "link");
  EXPECT_THAT(
      [&] {
        write_files_atomically({{path("a.txt"), "1"}, {path("link"), "2"}});
      },
      ThrowsMessage<InvalidConfig>("outputs '" + path("a.txt") + "' and '" + path("link") +
                                   "' are the same file; expected a different file for each"));
  EXPECT_EQ(names_in(dir_), (std::vector<std::string>{"link"}));
}

TEST_F(FileIo, SeveralOutputsAreAllWritten) {
  write_files_atomically({{path("a.txt"), "a"}, {path("b.txt"), "b"}, {"/dev/null", "c"}});
  EXPECT_EQ(read_file(path("a.txt")), "a");
  EXPECT_EQ(read_file(path("b.txt")), "b");
  EXPECT_EQ(names_in(dir_), (std::vector<std::string>{"a.txt", "b.txt"}));
  EXPECT_EQ(num_temporaries_in_flight(), 0U);
}

// ---- temporaries removed on SIGINT / SIGTERM (Note [temporaries on signals]) ----------------

using testing::status_of_child;

void expect_signal_removes_temporary(const fs::path& dir, int signal_number) {
  const std::string temp = (dir / ".out.txt.tmp.1.0").string();
  const std::string kept = (dir / "kept.txt").string();
  const int status = status_of_child([&] {
    remove_temporaries_on_signals();
    TemporaryFileGuard guard(temp);
    std::ofstream(temp) << "half";
    std::ofstream(kept) << "not a temporary";
    ::raise(signal_number);
  });
  ASSERT_TRUE(WIFSIGNALED(status)) << "status " << status;
  EXPECT_EQ(WTERMSIG(status), signal_number);  // the default action ran: "killed by signal"
  EXPECT_FALSE(fs::exists(temp));
  EXPECT_TRUE(fs::exists(kept));
}

TEST_F(FileIo, SigintRemovesTemporariesInFlightAndStillKillsTheProcess) {
  expect_signal_removes_temporary(dir_, SIGINT);
}

TEST_F(FileIo, SigtermRemovesTemporariesInFlightAndStillKillsTheProcess) {
  expect_signal_removes_temporary(dir_, SIGTERM);
}

TEST_F(FileIo, AnUnregisteredTemporaryIsNotRemoved) {
  const std::string temp = path(".out.txt.tmp.1.0");
  const int status = status_of_child([&] {
    remove_temporaries_on_signals();
    { TemporaryFileGuard guard(temp); }  // the write finished: no longer in flight
    std::ofstream(temp) << "renamed already, in real life";
    ::raise(SIGTERM);
  });
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(fs::exists(temp));
}

TEST_F(FileIo, TemporaryGuardsRegisterAndUnregister) {
  const std::size_t before = num_temporaries_in_flight();
  {
    TemporaryFileGuard a(path("a"));
    TemporaryFileGuard b(std::move(a));
    EXPECT_TRUE(b.is_registered());
    EXPECT_FALSE(a.is_registered());  // NOLINT(bugprone-use-after-move): moved-from is empty
    EXPECT_EQ(num_temporaries_in_flight(), before + 1);
  }
  EXPECT_EQ(num_temporaries_in_flight(), before);
  EXPECT_FALSE(TemporaryFileGuard(std::string(5000, 'x')).is_registered());
}

}  // namespace
}  // namespace metron
