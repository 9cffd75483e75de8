// Where tests find reference data. ../shared (next to the project root) holds
// real models and golden outputs; a user's fresh clone has none, so tests
// that need it skip with a message saying what is missing.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

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

// A fresh, empty scratch directory for one test.
inline std::string scratchDir(const std::string &name) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("llmc-test-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
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
