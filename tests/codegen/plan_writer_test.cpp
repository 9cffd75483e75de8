// Tests that writePlan only ever exposes a complete plan at its path: the
// temporary file is created exclusively (a symlink planted at any name is
// never followed), is removed on a write error (a file size limit standing in
// for a full disk) and on SIGTERM mid-write, and an old plan at the path
// survives a failed write untouched.
#include "common/test_paths.h"
#include "plan/plan_fixture.h"
#include "plan_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace llmc {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> entries(const std::string &dir) {
  std::vector<std::string> names;
  for (const auto &e : fs::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs `body` in a child process; returns its wait status.
template <typename F> int inChild(F body) {
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    body();
    std::_Exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST(PlanWriter, WritesTheFileAndLeavesNoTemporary) {
  std::string dir = test::scratchDir("plan-writer-ok");
  test::TinyPlan tiny = test::makeTinyPlan();
  auto written = writePlan(dir + "/a.plan", tiny.contents);
  ASSERT_TRUE(written.isOk()) << written.message();
  EXPECT_EQ(entries(dir), std::vector<std::string>{"a.plan"});
  EXPECT_EQ(fs::file_size(dir + "/a.plan"), written->fileSize);
  EXPECT_TRUE(Plan::open(dir + "/a.plan").isOk());
}

// The old writer opened "<out>.partial" with fopen("wb") and wrote through a
// symlink planted there.
TEST(PlanWriter, NeverFollowsASymlinkPlantedAtTheOldPartialName) {
  std::string dir = test::scratchDir("plan-writer-symlink");
  std::string victim = dir + "/victim";
  test::writeBytes(victim, std::vector<uint8_t>{'k', 'e', 'e', 'p'});
  fs::create_symlink(victim, dir + "/a.plan.partial");
  fs::create_symlink(victim, dir + "/.a.plan.partial");
  test::TinyPlan tiny = test::makeTinyPlan();
  ASSERT_TRUE(writePlan(dir + "/a.plan", tiny.contents).isOk());
  EXPECT_EQ(readAll(victim), "keep");
  EXPECT_TRUE(fs::is_symlink(dir + "/a.plan.partial"));
  EXPECT_EQ(entries(dir),
            (std::vector<std::string>{".a.plan.partial", "a.plan", "a.plan.partial", "victim"}));
}

TEST(PlanWriter, TemporaryFilesAreExclusiveAndUnique) {
  std::string dir = test::scratchDir("plan-writer-tmp");
  auto a = TemporaryPlanFile::create(dir + "/x.plan");
  auto b = TemporaryPlanFile::create(dir + "/x.plan");
  ASSERT_TRUE(a.isOk()) << a.message();
  ASSERT_TRUE(b.isOk()) << b.message();
  EXPECT_NE(a->path(), b->path());
  EXPECT_EQ(fs::path(a->path()).parent_path(), fs::path(dir));
  std::string pathA = a->path();
  { auto dropped = std::move(*a); } // destroyed uncommitted: removed
  EXPECT_FALSE(fs::exists(pathA));
  EXPECT_FALSE(TemporaryPlanFile::create(dir).isOk()); // a folder is no plan path
}

// RLIMIT_FSIZE in a child makes the weight writes fail as a full disk does:
// the error names the path, no temporary is left, the old plan is intact.
TEST(PlanWriter, AFailedWriteLeavesTheOldPlanAndNoTemporary) {
  std::string dir = test::scratchDir("plan-writer-full");
  test::writeBytes(dir + "/a.plan", std::vector<uint8_t>(10, 'o'));
  int status = inChild([&] {
    std::signal(SIGXFSZ, SIG_IGN); // writes fail with EFBIG instead of killing
    struct rlimit limit = {2048, 2048};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    test::TinyPlan tiny = test::makeTinyPlan();
    auto written = writePlan(dir + "/a.plan", tiny.contents);
    std::_Exit(!written.isOk() && written.message().find(dir + "/a.plan") != std::string::npos ? 42
                                                                                               : 1);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 42) << "the write did not fail with a message naming the plan";
  EXPECT_EQ(entries(dir), std::vector<std::string>{"a.plan"});
  EXPECT_EQ(readAll(dir + "/a.plan"), std::string(10, 'o'));
}

// SIGTERM while the weights are written (sent from the progress callback,
// so the timing is exact): the process dies of SIGTERM, as it would without
// the handler, and the handler has removed the temporary file.
TEST(PlanWriter, SigtermMidWriteLeavesNoTemporary) {
  for (int signal : {SIGTERM, SIGINT}) {
    std::string dir = test::scratchDir("plan-writer-sigterm");
    int status = inChild([&] {
      test::TinyPlan tiny = test::makeTinyPlan();
      (void)writePlan(dir + "/a.plan", tiny.contents, [&](uint64_t, uint64_t) { ::raise(signal); });
      std::_Exit(1); // not reached when the signal kills
    });
    ASSERT_TRUE(WIFSIGNALED(status)) << "signal " << signal;
    EXPECT_EQ(WTERMSIG(status), signal);
    EXPECT_TRUE(entries(dir).empty()) << entries(dir).front();
  }
}

// A signal the process ignores (nohup, a parent's SIG_IGN) stays ignored:
// the write goes on and the plan is complete.
TEST(PlanWriter, AnIgnoredSignalStaysIgnored) {
  std::string dir = test::scratchDir("plan-writer-ignored");
  int status = inChild([&] {
    std::signal(SIGTERM, SIG_IGN);
    test::TinyPlan tiny = test::makeTinyPlan();
    auto written =
        writePlan(dir + "/a.plan", tiny.contents, [](uint64_t, uint64_t) { ::raise(SIGTERM); });
    std::_Exit(written.isOk() && std::signal(SIGTERM, SIG_DFL) == SIG_IGN ? 42 : 1);
  });
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 42);
  EXPECT_EQ(entries(dir), std::vector<std::string>{"a.plan"});
  EXPECT_TRUE(Plan::open(dir + "/a.plan").isOk());
}

} // namespace
} // namespace llmc
