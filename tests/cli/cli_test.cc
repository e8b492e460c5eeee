// The metron command as a user meets it: exit codes (0 success, 1 runtime failure, 2 bad input),
// `metron: error: ...` on stderr, and outputs that are never half-written.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "metron/base/file_io.h"

namespace metron {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::StartsWith;

const std::string kSource = METRON_SOURCE_DIR;
const std::string kExample = kSource + "/examples/1f1b-2stage-dp2.json";
const std::string kExampleText = kSource + "/examples/1f1b-2stage-dp2.txt";
const std::string kData = kSource + "/tests/cli/data/";

struct Outcome {
  int code = -1;
  std::string out;
  std::string err;
};

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("metron-cli-" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Runs `metron <args>` through the shell, optionally feeding `input` on stdin.
  Outcome metron(const std::string& args, const std::string& input = "") const {
    const std::string out = (dir_ / "stdout").string();
    const std::string err = (dir_ / "stderr").string();
    std::string command = std::string(METRON_BINARY) + " " + args + " >" + out + " 2>" + err;
    if (!input.empty()) {
      write_file_atomically((dir_ / "stdin").string(), input);
      command += " <" + (dir_ / "stdin").string();
    }
    const int status = std::system(command.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(out), read_file(err)};
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(Cli, VersionAndHelpSucceed) {
  Outcome v = metron("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_THAT(v.out, StartsWith("metron 0."));
  Outcome h = metron("--help");
  EXPECT_EQ(h.code, 0);
  EXPECT_THAT(h.out, AllOf(HasSubstr("graph"), HasSubstr("Exit codes: 0 success, 1 runtime "
                                                         "failure, 2 bad input")));
  Outcome hc = metron("graph convert --help");
  EXPECT_EQ(hc.code, 0);
  EXPECT_THAT(hc.out, HasSubstr("written\natomically"));
}

TEST_F(Cli, CheckSummarisesAValidGraphAndItsRows) {
  Outcome r = metron("graph check " + kExample);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, IsEmpty());
  EXPECT_THAT(r.out, AllOf(HasSubstr("valid task graph"), HasSubstr("ranks     4"),
                           HasSubstr("tasks     72: 36 compute, 16 send, 16 recv, 4 collective"),
                           HasSubstr("no deadlock: every task completes in 16 unit steps"),
                           HasSubstr("rank 1: 1RECV_F0@0 1F0 1B0 1SEND_B0@0")));
  EXPECT_THAT(metron("graph check --quiet " + kExample).out, IsEmpty());
}

TEST_F(Cli, CheckReportsEveryProblemAndExitsWithTwo) {
  Outcome r = metron("graph check " + kData + "unmatched-send.txt");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.out, IsEmpty());
  EXPECT_THAT(
      r.err,
      AllOf(StartsWith("metron: error: invalid graph: 1 problem\n"),
            HasSubstr("unmatched send: task 3 (rank 0, stage 0, chunk 0, microbatch 1): send of "
                      "activation 0 bytes to rank 1 (tag 2)")));
}

TEST_F(Cli, CheckReportsADeadlockWithEveryBlockedTask) {
  Outcome r = metron("graph check " + kData + "swapped-receives.txt");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(
      r.err, AllOf(StartsWith("metron: error: deadlock: no task can make progress"),
                   HasSubstr("rank 0 stream \"pp-recv\""), HasSubstr("rank 1 stream \"pp-send\"")));
}

TEST_F(Cli, MalformedJsonNamesLineAndColumn) {
  Outcome r = metron("graph check " + kData + "missing-comma.json");
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, StartsWith("metron: error: " + kData + "missing-comma.json:3:"));
  EXPECT_THAT(r.err, HasSubstr("malformed JSON"));
}

TEST_F(Cli, BadArgumentsAreBadInput) {
  EXPECT_EQ(metron("").code, 2);
  Outcome unknown = metron("simulte");
  EXPECT_EQ(unknown.code, 2);
  EXPECT_EQ(unknown.err,
            "metron: error: unknown command 'simulte'; run 'metron --help' for usage\n");
  Outcome missing = metron("graph check " + path("nope.json"));
  EXPECT_EQ(missing.code, 2);
  EXPECT_THAT(missing.err, HasSubstr("cannot read '" + path("nope.json") + "': No such file"));
  Outcome format = metron("graph convert " + kExample + " - --to yaml");
  EXPECT_EQ(format.code, 2);
  EXPECT_THAT(format.err, HasSubstr("--to: yaml not in {json,text,csv}"));
}

TEST_F(Cli, ConvertJsonToTextGivesTheExampleText) {
  Outcome r = metron("graph convert " + kExample + " " + path("step.txt"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(read_file(path("step.txt")), read_file(kExampleText));
  EXPECT_EQ(metron("graph convert " + kExample + " - --to text").out, read_file(kExampleText));
}

TEST_F(Cli, ConvertTextToJsonAndBackIsStable) {
  ASSERT_EQ(metron("graph convert " + kExampleText + " " + path("step.json")).code, 0);
  ASSERT_EQ(metron("graph convert " + path("step.json") + " " + path("again.txt")).code, 0);
  EXPECT_EQ(read_file(path("again.txt")), read_file(kExampleText));
  EXPECT_EQ(metron("graph check -q " + path("step.json")).code, 0);
}

TEST_F(Cli, ConvertReadsStandardInputAndGuessesJson) {
  Outcome r = metron("graph convert - - --to text", read_file(kExample));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, read_file(kExampleText));
}

TEST_F(Cli, FailedConvertLeavesTheOutputUntouched) {
  write_file_atomically(path("out.json"), "previous content");
  Outcome r = metron("graph convert " + kData + "unmatched-send.txt " + path("out.json"));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(read_file(path("out.json")), "previous content");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator{}),
            3);  // + stdout, stderr
}

TEST_F(Cli, UnwritableOutputIsARuntimeFailure) {
  Outcome r = metron("graph convert " + kExample + " " + path("no-such-folder/out.json"));
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, StartsWith("metron: error: cannot write '" + path("no-such-folder/out.json")));
}

}  // namespace
}  // namespace metron
