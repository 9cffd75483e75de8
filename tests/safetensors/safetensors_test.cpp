// Tests the safetensors reader on files the tests write themselves: valid
// round trips, a corrupt-input matrix (one case per rule of the format), and
// sharded checkpoints through model.safetensors.index.json.
#include "frontend/safetensors.h"

#include "common/test_paths.h"
#include "safetensors_writer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>

namespace llmc {
namespace {

using test::assemble;
using test::makeImage;
using test::SafetensorsImage;
using test::TensorSpec;
using Json = nlohmann::json;

class SafetensorsTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = test::scratchDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string &name, const std::vector<uint8_t> &bytes) {
    std::string path = dir_ + "/" + name;
    test::writeFile(path, bytes);
    return path;
  }

  std::string dir_;
};

// Checks that `view` points into `file`'s mapping and holds the pattern of tensor `index`.
void expectMappedPattern(const SafetensorsFile &file, const TensorView &view, size_t index) {
  const uint8_t *begin = file.mapping().data();
  const uint8_t *dataBuffer = begin + 8 + file.header().headerSize;
  EXPECT_GE(view.data, dataBuffer) << view.name;
  EXPECT_LE(view.data + view.byteSize, begin + file.mapping().size()) << view.name;
  for (uint64_t k = 0; k < view.byteSize; ++k)
    ASSERT_EQ(view.data[k], test::patternByte(index, k)) << view.name << " byte " << k;
}

TEST_F(SafetensorsTest, RoundTripsEveryReadableDType) {
  // Names in alphabetical order differ from the data order on purpose.
  std::vector<TensorSpec> specs = {{"z.f32", "F32", {2, 3}},   {"y.f16", "F16", {4}},
                                   {"x.bf16", "BF16", {3, 1}}, {"w.i8", "I8", {5}},
                                   {"v.u8", "U8", {1, 1, 3}},  {"u.i32", "I32", {2}},
                                   {"t.i64", "I64", {3}},      {"s.scalar", "F32", {}}};
  SafetensorsImage image = makeImage(specs);
  image.padTo = 8;
  std::string path = write("model.safetensors", image.bytes());

  Expected<SafetensorsFile> file = SafetensorsFile::open(path);
  ASSERT_TRUE(file) << file.message();
  EXPECT_EQ(file->path(), path);
  EXPECT_EQ((8 + file->header().headerSize) % 8, 0u);
  ASSERT_EQ(file->tensors().size(), specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const TensorView &view = file->tensors()[i]; // sorted by offset == description order
    EXPECT_EQ(view.name, specs[i].name);
    EXPECT_EQ(dtypeName(view.dtype), specs[i].dtype);
    EXPECT_EQ(view.shape, specs[i].shape);
    EXPECT_EQ(view.byteSize, test::specBytes(specs[i]));
    EXPECT_EQ(view.file, path);
    expectMappedPattern(*file, view, i);
  }
}

TEST_F(SafetensorsTest, ParsesAnInMemoryImage) {
  std::vector<uint8_t> bytes = makeImage({{"a", "BF16", {2, 2}}, {"b", "I64", {1}}}).bytes();
  Expected<SafetensorsHeader> header = parseSafetensors(bytes.data(), bytes.size(), "mem");
  ASSERT_TRUE(header) << header.message();
  ASSERT_EQ(header->tensors.size(), 2u);
  EXPECT_EQ(header->tensors[1].name, "b");
  EXPECT_EQ(header->tensors[1].begin, 8u);
  EXPECT_EQ(header->tensors[1].end, 16u);
  EXPECT_EQ(header->headerSize, bytes.size() - 8 - 16);
}

TEST_F(SafetensorsTest, AcceptsZeroSizedTensors) {
  // Zero-sized tensors sit anywhere their (empty) range fits, even at the very end.
  std::vector<TensorSpec> specs = {{"empty.first", "F32", {0, 4}},
                                   {"a", "F16", {3}},
                                   {"empty.middle", "I8", {2, 0}},
                                   {"b", "U8", {2}},
                                   {"empty.last", "BF16", {0}}};
  std::string path = write("zero.safetensors", makeImage(specs).bytes());
  Expected<SafetensorsFile> file = SafetensorsFile::open(path);
  ASSERT_TRUE(file) << file.message();
  ASSERT_EQ(file->tensors().size(), 5u);
  std::map<std::string, const TensorView *> byName;
  for (const TensorView &view : file->tensors())
    byName[view.name] = &view;
  EXPECT_EQ(byName["empty.first"]->byteSize, 0u);
  EXPECT_EQ(byName["empty.middle"]->shape, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(byName["empty.last"]->data, file->mapping().data() + file->mapping().size());
  EXPECT_EQ(byName["b"]->data[1], test::patternByte(3, 1));
}

TEST_F(SafetensorsTest, AcceptsAFileWithoutTensors) {
  Expected<SafetensorsFile> file = SafetensorsFile::open(write("none.safetensors", assemble("{}")));
  ASSERT_TRUE(file) << file.message();
  EXPECT_TRUE(file->tensors().empty());
}

TEST_F(SafetensorsTest, ReadsMetadataAndPaddedHeader) {
  SafetensorsImage image = makeImage({{"w", "F32", {2}}}, {{"format", "pt"}, {"note", ""}});
  image.padTo = 64;
  std::string path = write("meta.safetensors", image.bytes());
  Expected<SafetensorsFile> file = SafetensorsFile::open(path);
  ASSERT_TRUE(file) << file.message();
  EXPECT_EQ(file->metadata().at("format"), "pt");
  EXPECT_EQ(file->metadata().at("note"), "");
  EXPECT_EQ(file->metadata().size(), 2u);
  EXPECT_EQ((8 + file->header().headerSize) % 64, 0u);
  expectMappedPattern(*file, file->tensors()[0], 0);
}

// ---------------------------------------------------------------------------
// Corrupt-input matrix. The base file holds 'a' F32 [2, 3] at [0, 24) and
// 'b' F16 [4] at [24, 32); each case breaks one rule.

struct CorruptCase {
  std::string name;
  std::function<std::vector<uint8_t>()> bytes;
  std::string tensor;   // the tensor the message must name ("" for file-level errors)
  std::string expected; // a phrase saying which rule failed
};

SafetensorsImage baseImage() { return makeImage({{"a", "F32", {2, 3}}, {"b", "F16", {4}}}); }

// The base image with `edit` applied to its header JSON.
std::function<std::vector<uint8_t>()> edited(std::function<void(Json &)> edit) {
  return [edit] {
    SafetensorsImage image = baseImage();
    edit(image.header);
    return image.bytes();
  };
}

// The base image's data behind a hand-written header text.
std::function<std::vector<uint8_t>()> withHeader(std::string text) {
  return [text] { return assemble(text, baseImage().data); };
}

std::function<std::vector<uint8_t>()> raw(std::vector<uint8_t> bytes) {
  return [bytes] { return bytes; };
}

const std::string kEntryA = R"({"dtype":"F32","shape":[2,3],"data_offsets":[0,24]})";
const std::string kEntryB = R"({"dtype":"F16","shape":[4],"data_offsets":[24,32]})";

std::vector<CorruptCase> corruptCases() {
  auto setA = [](const char *key, Json value) {
    return edited([key, value](Json &h) { h["a"][key] = value; });
  };
  auto dataResized = [](int64_t delta) {
    return [delta] {
      SafetensorsImage image = baseImage();
      image.data.resize(image.data.size() + delta, 0xAB);
      return image.bytes();
    };
  };
  return {
      {"EmptyFile", raw({}), "", "shorter than the 8-byte header length"},
      {"ShorterThan8Bytes", raw({1, 0, 0, 0, 0}), "", "shorter than the 8-byte header length"},
      {"HeaderLengthOverLimit", [] { return assemble("{}", {}, 100'000'001); }, "",
       "exceeds the 100000000-byte limit"},
      {"HeaderPastEndOfFile", [] { return assemble("{}", {}, 1000); }, "",
       "needs 1008 bytes but the file has 10"},
      {"HeaderNotUtf8", withHeader("{\"a\xff\":" + kEntryA + "}"), "", "not valid UTF-8"},
      {"HeaderOverlongUtf8", withHeader("{\"a\xc0\xaf\":" + kEntryA + "}"), "", "UTF-8"},
      {"HeaderNotJson", withHeader("{\"a\": " + kEntryA), "", "invalid JSON"},
      {"HeaderTrailingGarbage", withHeader("{\"a\":" + kEntryA + "}x"), "", "invalid JSON"},
      {"HeaderEmpty", raw(assemble("")), "", "invalid JSON"},
      {"HeaderNotObject", withHeader("[1, 2]"), "", "must be a JSON object"},
      {"HeaderLeadingSpace", withHeader(" {\"a\":" + kEntryA + "}"), "", "beginning with '{'"},
      {"DuplicateTensorName",
       withHeader("{\"a\":" + kEntryA + ",\"b\":" + kEntryB + ",\"a\":" + kEntryA + "}"), "a",
       "duplicate"},
      {"EntryNotObject", edited([](Json &h) { h["a"] = 5; }), "a", "expected an object"},
      {"MetadataNotObject", edited([](Json &h) {
         h["__metadata__"] = {1, 2};
       }),
       "", "__metadata__: expected an object of string -> string"},
      {"MetadataValueNotString", edited([](Json &h) {
         h["__metadata__"] = {{"format", 1}};
       }),
       "", "__metadata__: key 'format': expected a string"},
      {"MissingDType", edited([](Json &h) { h["b"].erase("dtype"); }), "b", "missing key 'dtype'"},
      {"MissingShape", edited([](Json &h) { h["b"].erase("shape"); }), "b", "missing key 'shape'"},
      {"MissingDataOffsets", edited([](Json &h) { h["a"].erase("data_offsets"); }), "a",
       "missing key 'data_offsets'"},
      {"UnknownKey", setA("extra", 1), "a", "unknown key 'extra'"},
      {"DTypeNotString", setA("dtype", 32), "a", "dtype: expected a string"},
      {"UnknownDType", setA("dtype", "F99"), "a", "unknown dtype 'F99'"},
      {"UnsupportedF64", setA("dtype", "F64"), "a",
       "unsupported dtype 'F64' (supported: F32, F16, BF16, I8, U8, I32, I64)"},
      {"UnsupportedBool", setA("dtype", "BOOL"), "a", "unsupported dtype 'BOOL'"},
      {"UnsupportedF8", setA("dtype", "F8_E4M3"), "a", "unsupported dtype 'F8_E4M3'"},
      {"ShapeNotArray", setA("shape", 6), "a", "shape: expected an array"},
      {"ShapeNegativeDim", setA("shape", {-2, -3}), "a", "dimension 0"},
      {"ShapeFractionalDim", setA("shape", {2, 3.5}), "a", "dimension 1"},
      {"ShapeStringDim", setA("shape", {"2", 3}), "a", "dimension 0"},
      {"ShapeDimAbove2To63", setA("shape", {uint64_t(1) << 63}), "a", "below 2^63"},
      {"OffsetsNotArray", setA("data_offsets", 0), "a", "data_offsets: expected [begin, end]"},
      {"OffsetsOneValue", setA("data_offsets", {0}), "a", "data_offsets: expected [begin, end]"},
      {"OffsetsThreeValues", setA("data_offsets", {0, 24, 32}), "a",
       "data_offsets: expected [begin, end]"},
      {"OffsetsNegative", setA("data_offsets", {-8, 24}), "a", "non-negative integers"},
      {"OffsetsNotIntegers", setA("data_offsets", {0.0, "24"}), "a", "non-negative integers"},
      {"OffsetsBeginAfterEnd", setA("data_offsets", {24, 0}), "a", "begin > end"},
      {"ElementCountOverflow", setA("shape", {uint64_t(1) << 62, uint64_t(1) << 62}), "a",
       "overflows a 64-bit element count"},
      {"ElementCountOverflowBeforeZeroDim",
       setA("shape", {uint64_t(1) << 62, uint64_t(1) << 62, 0}), "a",
       "overflows a 64-bit element count"},
      {"ByteSizeOverflowByDTypeSize", setA("shape", {uint64_t(1) << 62}), "a",
       "overflows a 64-bit byte count"},
      {"ByteSizeMismatch", setA("shape", {2, 2}), "a",
       "shape [2, 2] x F32 needs 16 bytes but data_offsets [0, 24] span 24"},
      {"FirstTensorNotAtZero", edited([](Json &h) {
         h["a"]["data_offsets"] = {8, 32};
         h["b"]["data_offsets"] = {32, 40};
       }),
       "a", "must begin at offset 0"},
      {"HoleBetweenTensors", edited([](Json &h) {
         h["b"]["data_offsets"] = {28, 36};
       }),
       "b", "hole of 4 bytes after tensor 'a'"},
      {"OverlappingTensors", edited([](Json &h) {
         h["b"]["data_offsets"] = {16, 24};
       }),
       "b", "overlap tensor 'a'"},
      {"SameRangeTwice", edited([](Json &h) {
         h["b"] = {{"dtype", "F32"}, {"shape", {6}}, {"data_offsets", {0, 24}}};
       }),
       "b", "overlap tensor 'a'"},
      {"TrailingBytes", dataResized(4), "b", "4 trailing bytes"},
      {"MissingBytes", dataResized(-4), "b", "end past the data buffer of 28 bytes"},
      {"TrailingBytesWithoutTensors", raw(assemble("{}", {1, 2, 3})), "", "3 trailing bytes"},
  };
}

class SafetensorsCorruptTest : public ::testing::TestWithParam<CorruptCase> {};

TEST_P(SafetensorsCorruptTest, FailsWithAMessageNamingFileAndTensor) {
  const CorruptCase &c = GetParam();
  std::string dir = test::scratchDir("corrupt-" + c.name);
  std::string path = dir + "/" + c.name + ".safetensors";
  test::writeFile(path, c.bytes());
  Expected<SafetensorsFile> file = SafetensorsFile::open(path);
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(file) << "accepted a corrupt file";
  const std::string &message = file.message();
  EXPECT_NE(message.find(path + ": "), std::string::npos) << message;
  if (!c.tensor.empty())
    EXPECT_NE(message.find("'" + c.tensor + "'"), std::string::npos) << message;
  EXPECT_NE(message.find(c.expected), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(Rules, SafetensorsCorruptTest, ::testing::ValuesIn(corruptCases()),
                         [](const auto &info) { return info.param.name; });

// ---------------------------------------------------------------------------
// WeightSet: lists of files and sharded checkpoints.

TEST_F(SafetensorsTest, WeightSetJoinsFilesAndRejectsATensorInTwo) {
  std::string one = write("one.safetensors", makeImage({{"a", "F32", {2}}}).bytes());
  std::string two = write("two.safetensors", makeImage({{"b", "I8", {3}}}).bytes());
  Expected<WeightSet> set = WeightSet::openFiles({one, two});
  ASSERT_TRUE(set) << set.message();
  ASSERT_NE(set->find("b"), nullptr);
  EXPECT_EQ(set->find("b")->file, two);
  EXPECT_EQ(set->find("missing"), nullptr);
  EXPECT_EQ(set->totalBytes(), 11u);
  EXPECT_EQ(set->files().size(), 2u);
  EXPECT_EQ(set->find("a")->data, set->files()[0].tensors()[0].data);

  std::string again = write("again.safetensors", makeImage({{"a", "F32", {2}}}).bytes());
  Expected<WeightSet> dup = WeightSet::openFiles({one, again});
  ASSERT_FALSE(dup);
  EXPECT_NE(dup.message().find("tensor 'a' is in both " + one + " and " + again), std::string::npos)
      << dup.message();
  EXPECT_FALSE(WeightSet::openFiles({}));
}

class SafetensorsIndexTest : public SafetensorsTest {
protected:
  // Two shards in dir_/shards: a, b in the first; c in the second. The index
  // sits in dir_ and names them relative to its folder.
  void SetUp() override {
    SafetensorsTest::SetUp();
    std::filesystem::create_directories(dir_ + "/shards");
    first_ = write("shards/model-00001-of-00002.safetensors",
                   makeImage({{"a", "F32", {2}}, {"b", "BF16", {4}}}).bytes());
    second_ =
        write("shards/model-00002-of-00002.safetensors", makeImage({{"c", "I32", {3}}}).bytes());
    index_ = {{"metadata", {{"total_size", 28}}},
              {"weight_map",
               {{"a", "shards/model-00001-of-00002.safetensors"},
                {"b", "shards/model-00001-of-00002.safetensors"},
                {"c", "shards/model-00002-of-00002.safetensors"}}}};
  }

  Expected<WeightSet> openIndex() {
    std::string path = dir_ + "/model.safetensors.index.json";
    test::writeFile(path, index_.dump(2));
    return WeightSet::openIndex(path);
  }

  // Asserts that opening the index fails with a message holding every phrase.
  void expectError(const std::vector<std::string> &phrases) {
    Expected<WeightSet> set = openIndex();
    ASSERT_FALSE(set) << "accepted a malformed index";
    for (const std::string &phrase : phrases)
      EXPECT_NE(set.message().find(phrase), std::string::npos) << set.message();
  }

  std::string first_, second_;
  Json index_;
};

TEST_F(SafetensorsIndexTest, OpensShards) {
  Expected<WeightSet> set = openIndex();
  ASSERT_TRUE(set) << set.message();
  EXPECT_EQ(set->all().size(), 3u);
  EXPECT_EQ(set->files().size(), 2u);
  EXPECT_EQ(set->totalBytes(), 28u);
  ASSERT_NE(set->find("c"), nullptr);
  EXPECT_EQ(set->find("c")->dtype, DType::I32);
  EXPECT_EQ(set->find("c")->data[0], test::patternByte(0, 0));
  EXPECT_EQ(set->find("b")->data[7], test::patternByte(1, 7));
}

TEST_F(SafetensorsIndexTest, TreatsSpellingsOfOneShardAsOneFile) {
  index_["weight_map"]["b"] = "./shards/../shards/model-00001-of-00002.safetensors";
  Expected<WeightSet> set = openIndex();
  ASSERT_TRUE(set) << set.message();
  EXPECT_EQ(set->files().size(), 2u);
}

TEST_F(SafetensorsIndexTest, RejectsAMissingShardFile) {
  index_["weight_map"]["c"] = "shards/model-00003-of-00002.safetensors";
  expectError({"model.safetensors.index.json", "tensor 'c'", "model-00003-of-00002.safetensors",
               "cannot open"});
}

TEST_F(SafetensorsIndexTest, RejectsATensorMappedToTheWrongShard) {
  index_["weight_map"]["b"] = "shards/model-00002-of-00002.safetensors";
  expectError({"model.safetensors.index.json", "tensor 'b' is mapped to " + second_,
               "is stored in " + first_});
}

TEST_F(SafetensorsIndexTest, RejectsATensorMissingFromTheWeightMap) {
  index_["weight_map"].erase("b");
  expectError(
      {first_ + ": tensor 'b' is not listed in the weight_map of", "model.safetensors.index.json"});
}

TEST_F(SafetensorsIndexTest, RejectsATensorInTwoShards) {
  write("shards/model-00002-of-00002.safetensors",
        makeImage({{"c", "I32", {3}}, {"a", "F32", {2}}}).bytes());
  expectError({"tensor 'a' is in both " + first_ + " and " + second_});
}

TEST_F(SafetensorsIndexTest, RejectsAMappedTensorNoShardHolds) {
  index_["weight_map"]["d"] = "shards/model-00002-of-00002.safetensors";
  expectError({"model.safetensors.index.json", "tensor 'd'", "no shard contains it"});
}

TEST_F(SafetensorsIndexTest, RejectsAMalformedIndex) {
  index_.erase("weight_map");
  expectError({"model.safetensors.index.json", "field 'weight_map'"});
  index_ = {{"weight_map", {{"a", 5}}}};
  expectError({"model.safetensors.index.json", "tensor 'a'", "shard file name"});
  index_ = {{"weight_map", {{"a", "/abs/model.safetensors"}}}};
  expectError({"model.safetensors.index.json", "tensor 'a'", "relative"});
}

TEST_F(SafetensorsIndexTest, ReportsACorruptShard) {
  write("shards/model-00002-of-00002.safetensors", assemble("{}", {}, 99));
  expectError({"model.safetensors.index.json", second_ + ": header length 99"});
}

} // namespace
} // namespace llmc
