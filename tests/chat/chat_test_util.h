// Shared helpers for the chat-template tests: read files, render a template
// with the same fixed strftime_now moment as make_renderings.py.
#pragma once

#include "chat/chat_template.h"
#include "common/test_paths.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace llmc::chat::test {

constexpr int64_t kFixedTime = 1735732800; // make_renderings.py FIXED_TIME

inline std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline OrderedJson readJson(const std::string &path) {
  auto json = parseOrderedJson(readFile(path), path);
  EXPECT_TRUE(json.isOk()) << json.message();
  return json.isOk() ? *json : OrderedJson();
}

} // namespace llmc::chat::test
