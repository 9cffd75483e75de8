#include "common/test_paths.h"
#include "support/dtype.h"
#include "support/json.h"
#include "support/mapped_file.h"

#include <cstring>
#include <fstream>
#include <unistd.h>
#include <vector>

namespace llmc {
namespace {

TEST(Json, RejectsDuplicateKeysWithTheKeyName) {
  auto parsed = parseJson(R"({"a": 1, "b": {"c": 1, "c": 2}})", "x.json");
  ASSERT_FALSE(parsed.isOk());
  EXPECT_NE(parsed.message().find("duplicate key 'c'"), std::string::npos) << parsed.message();
  EXPECT_EQ(parsed.message().rfind("x.json: ", 0), 0u) << parsed.message();
}

TEST(Json, RejectsDeepNestingAndInvalidUtf8) {
  std::string deep(1000, '[');
  EXPECT_FALSE(parseJson(deep, "deep.json").isOk());
  EXPECT_FALSE(parseJson("{\"a\": \"\xff\xfe\"}", "utf8.json").isOk());
  EXPECT_FALSE(parseJson("{\"a\": 1", "truncated.json").isOk());
}

TEST(Json, TypedFieldsNameFileAndField) {
  auto parsed = parseJson(R"({"n": 4096.0, "s": "x", "bad": "7", "f": 4096.5})", "config.json");
  ASSERT_TRUE(parsed.isOk()) << parsed.message();
  EXPECT_EQ(*requireInt(*parsed, "n", "config.json"), 4096);
  auto bad = requireInt(*parsed, "bad", "config.json");
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.message(), "config.json: field 'bad': expected an integer, got string");
  EXPECT_FALSE(requireInt(*parsed, "f", "config.json").isOk());
  auto missing = requireString(*parsed, "nope", "config.json");
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.message().find("missing required field 'nope'"), std::string::npos);
  EXPECT_EQ(*optionalInt(*parsed, "nope", 7, "config.json"), 7);
}

TEST(DType, NamesRoundTrip) {
  for (int i = 0; i < kNumDTypes; ++i) {
    auto t = static_cast<DType>(i);
    EXPECT_EQ(dtypeFromName(dtypeName(t)), t);
    EXPECT_GT(dtypeSize(t), 0u);
  }
  EXPECT_FALSE(dtypeFromName("F8_E4M3").has_value());
}

TEST(MappedFile, MapsContentsAndNamesMissingFiles) {
  std::string dir = test::scratchDir("mapped");
  std::string path = dir + "/f.bin";
  std::ofstream(path) << "hello";
  auto file = MappedFile::open(path);
  ASSERT_TRUE(file.isOk()) << file.message();
  EXPECT_EQ(std::string(reinterpret_cast<const char *>(file->data()), file->size()), "hello");
  auto missing = MappedFile::open(dir + "/nope.bin");
  ASSERT_FALSE(missing.isOk());
  EXPECT_NE(missing.message().find("nope.bin"), std::string::npos);
}

// releasePages gives back only whole pages inside the range, nothing
// outside the mapping, and the bytes read afterwards are the file's.
TEST(MappedFile, ReleasedPagesReadTheFileAgain) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::string path = test::scratchDir("mapped-release") + "/f.bin";
  std::string contents(4 * page, '\0');
  for (size_t i = 0; i < contents.size(); ++i)
    contents[i] = static_cast<char>(i * 7 + i / page);
  std::ofstream(path, std::ios::binary) << contents;
  auto file = MappedFile::open(path);
  ASSERT_TRUE(file.isOk()) << file.message();
  const uint8_t *data = file->data();
  EXPECT_EQ(std::memcmp(data, contents.data(), contents.size()), 0); // resident now
  // From the middle of page 0 to the middle of page 3: pages 1 and 2.
  EXPECT_EQ(file->releasePages(data + page / 2, 3 * page), 2 * page);
  EXPECT_EQ(file->releasePages(data + 1, page - 2), 0u);    // no whole page
  EXPECT_EQ(file->releasePages(data + page, 4 * page), 0u); // past the end
  const std::vector<uint8_t> elsewhere(2 * page);
  EXPECT_EQ(file->releasePages(elsewhere.data(), elsewhere.size()), 0u);
  EXPECT_EQ(std::memcmp(data, contents.data(), contents.size()), 0);
}

} // namespace
} // namespace llmc
