// Reads the real stories260K checkpoints: the tied one bundled with llmc
// (assets/stories260k), the untied one from ../shared (skips without it).
#include "frontend/safetensors.h"

#include "common/test_paths.h"

#include <gtest/gtest.h>

#include <cstring>

namespace llmc {
namespace {

const char *kUntied = "models/stories260k-untied/model.safetensors";

TEST(SafetensorsGoldenTest, ReadsStories260k) {
  const std::string tied = test::bundledStories260k("model.safetensors");
  Expected<SafetensorsFile> file = SafetensorsFile::open(tied);
  ASSERT_TRUE(file) << file.message();
  EXPECT_EQ(file->tensors().size(), 47u);
  EXPECT_EQ(file->metadata().at("format"), "pt");
  uint64_t bytes = 0;
  for (const TensorView &view : file->tensors()) {
    EXPECT_EQ(view.dtype, DType::F32) << view.name;
    bytes += view.byteSize;
  }
  // The tensors tile the data buffer exactly.
  EXPECT_EQ(bytes, file->mapping().size() - 8 - file->header().headerSize);

  Expected<WeightSet> set = WeightSet::openFiles({tied});
  ASSERT_TRUE(set) << set.message();
  const TensorView *embed = set->find("model.embed_tokens.weight");
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(embed->shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(embed->byteSize, 512u * 64u * 4u);
  const TensorView *norm = set->find("model.norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->shape, (std::vector<int64_t>{64}));
  EXPECT_EQ(set->find("model.layers.4.mlp.down_proj.weight")->shape,
            (std::vector<int64_t>{64, 172}));
  EXPECT_EQ(set->find("lm_head.weight"), nullptr) << "stories260k ties its embeddings";
  // Values read independently (Python struct) from the same file.
  float values[2];
  std::memcpy(values, embed->data, sizeof values);
  EXPECT_FLOAT_EQ(values[0], -0.29474878f);
  EXPECT_FLOAT_EQ(values[1], 0.56189561f);
  std::memcpy(values, norm->data, sizeof values);
  EXPECT_FLOAT_EQ(values[0], 2.45830894f);
  EXPECT_FLOAT_EQ(values[1], 1.36732268f);
}

TEST(SafetensorsGoldenTest, UntiedVariantHasLmHead) {
  LLMC_REQUIRE_SHARED(kUntied);
  Expected<WeightSet> set = WeightSet::openFiles({test::sharedPath(kUntied)});
  ASSERT_TRUE(set) << set.message();
  EXPECT_EQ(set->all().size(), 48u);
  const TensorView *head = set->find("lm_head.weight");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->dtype, DType::F32);
  EXPECT_EQ(head->shape, (std::vector<int64_t>{512, 64}));
  // The untied head is a copy of the embedding.
  const TensorView *embed = set->find("model.embed_tokens.weight");
  ASSERT_NE(embed, nullptr);
  EXPECT_EQ(std::memcmp(head->data, embed->data, head->byteSize), 0);
}

} // namespace
} // namespace llmc
