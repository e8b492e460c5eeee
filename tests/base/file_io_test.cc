#include "metron/base/file_io.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "metron/base/error.h"

namespace metron {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
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

}  // namespace
}  // namespace metron
