// Where tests find reference data. ../shared (next to the project root) holds
// real models and golden outputs; a user's fresh clone has none, so tests
// that need it skip with a message saying what is missing.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <unistd.h>
#include <vector>

namespace llmc::test {

// The shared data folder: $LLMC_SHARED_DIR, else <source>/../shared.
inline std::string sharedDir() {
  if (const char *env = std::getenv("LLMC_SHARED_DIR"))
    return env;
  return std::string(LLMC_SOURCE_DIR) + "/../shared";
}

inline std::string sharedPath(const std::string &relative) { return sharedDir() + "/" + relative; }

// The stories260K model bundled with llmc (assets/stories260k: real trained
// weights, in every clone), or one of its files.
inline std::string bundledStories260k(const std::string &file = "") {
  std::string dir = std::string(LLMC_SOURCE_DIR) + "/assets/stories260k";
  return file.empty() ? dir : dir + "/" + file;
}

// tests/data inside the project.
inline std::string testDataPath(const std::string &relative) {
  return std::string(LLMC_SOURCE_DIR) + "/tests/data/" + relative;
}

// Scratch directories made by this test process, removed when it exits
// (set LLMC_KEEP_TEST_DIRS=1 to keep them for a look after a failure). Only
// the process that made them removes them: a forked child (death tests, the
// server tests' clients) that exits must not delete its parent's files.
struct ScratchRegistry {
  pid_t owner = ::getpid();
  std::vector<std::filesystem::path> dirs;
  ~ScratchRegistry() {
    if (::getpid() != owner || std::getenv("LLMC_KEEP_TEST_DIRS"))
      return;
    std::error_code ignored;
    for (const auto &dir : dirs)
      std::filesystem::remove_all(dir, ignored);
  }
};
inline ScratchRegistry &scratchRegistry() {
  static ScratchRegistry registry;
  return registry;
}

// A fresh, empty scratch directory for one test, removed at exit.
inline std::string scratchDir(const std::string &name) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("llmc-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  scratchRegistry().dirs.push_back(dir);
  return dir.string();
}

} // namespace llmc::test

// Skips the current test unless ../shared/<relative> exists.
#define LLMC_REQUIRE_SHARED(relative)                                                              \
  do {                                                                                             \
    if (!std::filesystem::exists(::llmc::test::sharedPath(relative)))                              \
      GTEST_SKIP() << "reference data not found: " << ::llmc::test::sharedPath(relative)           \
                   << " (../shared is only present in the llmc development checkout)";             \
  } while (0)
