// The engine plan format: writer/loader round trip, a corrupt-plan matrix
// (one case per check of the loader), and the memory planner.
#include "common/test_paths.h"
#include "kernels/common/half.h"
#include "memory_planner.h"
#include "plan/checksum.h"
#include "plan_fixture.h"

#include <chrono>
#include <fcntl.h>
#include <future>
#include <sys/stat.h>
#include <unistd.h>

namespace llmc {
namespace {

using test::headerOf;
using test::readBytes;
using test::rewriteMetadata;
using test::setHeader;
using test::writeBytes;

class PlanFile : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = test::scratchDir("plan");
    path_ = dir_ + "/tiny.plan";
    tiny_ = test::makeTinyPlan();
    auto written = writePlan(path_, tiny_.contents);
    ASSERT_TRUE(written.isOk()) << written.message();
  }

  // Expects Plan::open to fail with a message naming the file and containing `what`.
  void expectRejected(const std::string &what) {
    auto plan = Plan::open(path_);
    ASSERT_FALSE(plan.isOk()) << "a corrupt plan was accepted (expected: " << what << ")";
    EXPECT_NE(plan.message().find(path_), std::string::npos) << plan.message();
    EXPECT_NE(plan.message().find(what), std::string::npos) << plan.message();
  }

  void mutateBytes(const std::function<void(std::vector<uint8_t> &)> &mutate) {
    std::vector<uint8_t> bytes = readBytes(path_);
    mutate(bytes);
    writeBytes(path_, bytes);
  }

  std::string dir_, path_;
  test::TinyPlan tiny_;
};

TEST_F(PlanFile, RoundTripsMetadataAndWeights) {
  auto plan = Plan::open(path_);
  ASSERT_TRUE(plan.isOk()) << plan.message();
  EXPECT_EQ(plan->meta().model()->hidden_size(), test::kHidden);
  ASSERT_EQ(plan->meta().tensors()->size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) {
    const uint8_t *data = plan->tensorData(i);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(data) % kPlanWeightAlignment, 0u) << "tensor " << i;
    EXPECT_EQ(std::memcmp(data, tiny_.storage[i].data(), tiny_.storage[i].size() * 4), 0);
  }
  EXPECT_EQ(plan->findTensor("norm"), 1);
  EXPECT_EQ(plan->findTensor("nope"), -1);
  EXPECT_NE(plan->program(fb::Target::Cpu, fb::Phase::Decode), nullptr);
  EXPECT_EQ(plan->program(fb::Target::Sm90a, fb::Phase::Decode), nullptr);
  EXPECT_FALSE(std::filesystem::exists(path_ + ".partial"));
}

TEST_F(PlanFile, WriterConvertsDtypesWithRoundToNearestEven) {
  tiny_.contents.meta.tensors[2]->dtype = fb::DType::BF16;
  ASSERT_TRUE(writePlan(path_, tiny_.contents).isOk());
  auto plan = Plan::open(path_);
  ASSERT_TRUE(plan.isOk()) << plan.message();
  const auto *bf16 = reinterpret_cast<const uint16_t *>(plan->tensorData(2));
  for (size_t i = 0; i < tiny_.storage[2].size(); ++i)
    EXPECT_EQ(bf16[i], hd::f32ToBf16(tiny_.storage[2][i]));
}

// --- Corrupt bytes.
TEST_F(PlanFile, RejectsEmptyFile) {
  writeBytes(path_, {});
  expectRejected("shorter than the 64-byte plan header");
}
TEST_F(PlanFile, RejectsTruncatedHeader) {
  mutateBytes([](auto &b) { b.resize(40); });
  expectRejected("shorter than the 64-byte plan header");
}
TEST_F(PlanFile, RejectsTruncatedMetadata) {
  mutateBytes([](auto &b) { b.resize(headerOf(b).metadataOffset + 16); });
  expectRejected("metadata section");
}
TEST_F(PlanFile, RejectsTruncatedWeights) {
  mutateBytes([](auto &b) { b.pop_back(); });
  expectRejected("weight section");
}
TEST_F(PlanFile, RejectsTrailingBytes) {
  mutateBytes([](auto &b) { b.push_back(0); });
  expectRejected("end of the file");
}
TEST_F(PlanFile, RejectsBadMagic) {
  mutateBytes([](auto &b) { b[0] = 'X'; });
  expectRejected("bad magic");
}
TEST_F(PlanFile, RejectsNewerFormatVersionWithAHint) {
  mutateBytes([](auto &b) {
    auto h = headerOf(b);
    h.formatVersion = kPlanFormatVersion + 1;
    setHeader(b, h);
  });
  expectRejected("is newer than this runtime supports");
}
// Format versions 1 (FNV-1a weight checksum) and 2 (positional step
// parameters) are refused, never misread.
TEST_F(PlanFile, RejectsOlderFormatVersionWithARebuildHint) {
  for (uint32_t version : {1u, 2u}) {
    mutateBytes([&](auto &b) {
      auto h = headerOf(b);
      h.formatVersion = version;
      setHeader(b, h);
    });
    expectRejected("plan format version " + std::to_string(version) +
                   " is older than this runtime reads (3); rebuild the plan with llmc >= 0.1.0");
  }
}
TEST_F(PlanFile, WeightChecksumIsXxh3OfTheSection) {
  mutateBytes([](auto &b) {
    auto h = headerOf(b);
    EXPECT_NE(h.weightsChecksum, 0u);
    EXPECT_EQ(h.weightsChecksum, planWeightChecksum(b.data() + h.weightsOffset, h.weightsSize));
    PlanWeightHasher pieces; // any chunking gives the one-call value
    for (uint64_t at = 0; at < h.weightsSize; at += 7)
      pieces.update(b.data() + h.weightsOffset + at, std::min<uint64_t>(7, h.weightsSize - at));
    EXPECT_EQ(pieces.finish(), h.weightsChecksum);
  });
}
TEST_F(PlanFile, RejectsWrongHeaderSize) {
  mutateBytes([](auto &b) {
    auto h = headerOf(b);
    h.headerSize = 72;
    setHeader(b, h);
  });
  expectRejected("header size 72");
}
TEST_F(PlanFile, RejectsOverflowingMetadataRange) {
  mutateBytes([](auto &b) {
    auto h = headerOf(b);
    h.metadataSize = ~uint64_t(0) - 8;
    setHeader(b, h);
  });
  expectRejected("metadata section");
}
TEST_F(PlanFile, RejectsUnalignedWeightSection) {
  mutateBytes([](auto &b) {
    auto h = headerOf(b);
    h.weightsOffset -= 8;
    h.weightsSize += 8;
    setHeader(b, h);
  });
  expectRejected("is not a multiple of 256");
}
TEST_F(PlanFile, RejectsBitFlipInMetadata) {
  mutateBytes([](auto &b) { b[headerOf(b).metadataOffset + 40] ^= 0x10; });
  expectRejected("metadata checksum mismatch");
}
TEST_F(PlanFile, RejectsBitFlipInWeights) {
  mutateBytes([](auto &b) { b[headerOf(b).weightsOffset + 5] ^= 0x01; });
  expectRejected("weight section checksum mismatch");
}
TEST_F(PlanFile, RejectsGarbageMetadataWithAValidChecksum) {
  mutateBytes([](auto &b) {
    auto h = headerOf(b);
    for (uint64_t i = 8; i < h.metadataSize; i += 3)
      b[h.metadataOffset + i] ^= 0x5a;
    h.metadataChecksum = fnv1a64(b.data() + h.metadataOffset, h.metadataSize);
    setHeader(b, h);
  });
  expectRejected("fails verification");
}
TEST_F(PlanFile, RejectsWrongFileIdentifier) {
  mutateBytes([](auto &b) {
    auto h = headerOf(b);
    b[h.metadataOffset + 4] = 'X';
    h.metadataChecksum = fnv1a64(b.data() + h.metadataOffset, h.metadataSize);
    setHeader(b, h);
  });
  expectRejected("identifier");
}

// --- Consistent files whose contents are wrong.
TEST_F(PlanFile, RejectsTensorSizeThatDisagreesWithShape) {
  rewriteMetadata(path_, [](fb::PlanT &p) { p.tensors[1]->shape = {9}; });
  expectRejected("tensor 1 'norm': dtype x shape is 36 bytes but size is 32");
}
TEST_F(PlanFile, RejectsTensorOutsideTheWeightSection) {
  rewriteMetadata(path_, [](fb::PlanT &p) { p.tensors[2]->offset = 1 << 20; });
  expectRejected("lies outside the weight section");
}
TEST_F(PlanFile, RejectsOverlappingTensors) {
  rewriteMetadata(path_, [](fb::PlanT &p) { p.tensors[2]->offset = p.tensors[0]->offset; });
  expectRejected("overlap");
}
TEST_F(PlanFile, RejectsUnknownTensorDtype) {
  rewriteMetadata(path_, [](fb::PlanT &p) { p.tensors[1]->dtype = static_cast<fb::DType>(77); });
  expectRejected("unknown dtype 77");
}
TEST_F(PlanFile, RejectsNonPositiveDimension) {
  rewriteMetadata(path_, [](fb::PlanT &p) { p.tensors[1]->shape = {-8}; });
  expectRejected("invalid or overflowing shape dimension -8");
}
TEST_F(PlanFile, RejectsHeadsNotDivisibleByKvHeads) {
  rewriteMetadata(path_, [](fb::PlanT &p) { p.model->num_kv_heads = 3; });
  expectRejected("num_kv_heads");
}
TEST_F(PlanFile, RejectsKvCacheGeometryMismatch) {
  rewriteMetadata(path_, [](fb::PlanT &p) { p.kv_cache->head_dim = 8; });
  expectRejected("kv_cache geometry");
}
TEST_F(PlanFile, RejectsMissingTokenizer) {
  rewriteMetadata(path_, [](fb::PlanT &p) { p.tokenizer.reset(); });
  expectRejected("no tokenizer");
}
TEST_F(PlanFile, RejectsStepBufferIndexOutOfRange) {
  rewriteMetadata(path_, [](fb::PlanT &p) { p.programs[0]->steps[1]->inputs = {99}; });
  expectRejected("names buffer 99");
}
TEST_F(PlanFile, RejectsStepTensorIndexOutOfRange) {
  rewriteMetadata(path_, [](fb::PlanT &p) { p.programs[1]->steps[2]->weights = {7}; });
  expectRejected("names tensor 7");
}
TEST_F(PlanFile, RejectsUnknownOpKind) {
  rewriteMetadata(path_, [](fb::PlanT &p) {
    p.programs[0]->steps[1]->op = static_cast<fb::OpKind>(999);
  });
  expectRejected("unknown op kind 999");
}
TEST_F(PlanFile, RejectsWrongOperandCount) {
  rewriteMetadata(path_, [](fb::PlanT &p) { p.programs[0]->steps[1]->weights.clear(); });
  expectRejected("Norm has 1 inputs, 1 outputs, 0 weights (the kind takes 1..1, 1, 1..2)");
}
TEST_F(PlanFile, RejectsLinearWeightThatDoesNotFitItsBuffers) {
  rewriteMetadata(path_, [](fb::PlanT &p) { p.programs[0]->steps[2]->weights = {0}; });
  expectRejected("Linear: weight [N, K] 'embed' must be a float [8, 8], got F32 [16, 8]");
}
TEST_F(PlanFile, RejectsBufferOutsideTheArena) {
  rewriteMetadata(path_, [](fb::PlanT &p) { p.programs[0]->arena_bytes_per_token = 16; });
  expectRejected("outside the arena");
}
TEST_F(PlanFile, RejectsTokenBufferOfTheWrongDtype) {
  rewriteMetadata(path_, [](fb::PlanT &p) { p.programs[0]->token_buffer = 1; });
  expectRejected("token buffer must be I32");
}
TEST_F(PlanFile, RejectsCpuStepThatNamesAKernel) {
  rewriteMetadata(path_, [](fb::PlanT &p) { p.programs[0]->steps[0]->kernel = 0; });
  expectRejected("must not reference a kernel");
}
TEST_F(PlanFile, RejectsGpuStepWithoutAModule) {
  rewriteMetadata(path_, [](fb::PlanT &p) {
    p.programs[1]->target = fb::Target::Sm90a;
    for (auto &s : p.programs[1]->steps)
      s->kernel = 0;
  });
  expectRejected("has no function in a module for target Sm90a");
}
TEST_F(PlanFile, RejectsSyntheticFlagWithoutInitRules) {
  rewriteMetadata(path_, [](fb::PlanT &p) { p.synthetic = true; });
  expectRejected("synthetic plan tensor without an init rule");
}

// --- The memory plan: buffers live together never share bytes; offsets aligned.
// Tiny plan buffers: 0 tokens [0,4) live -1..0, 1 [4,36) 0..1, 2 [36,68) 1..2,
// 3 [68,100) 2..3, 4 logits [100,164) 3..end.
TEST_F(PlanFile, RejectsEmbeddingOutputOverTheTokenIds) {
  // The embedding would write rows over the ids it is reading (a wild read).
  rewriteMetadata(path_, [](fb::PlanT &p) { p.programs[0]->buffers[1]->offset_per_token = 0; });
  expectRejected("program 0: buffer 1 [0, 32) and buffer 0 [0, 4) bytes per token "
                 "overlap in the activation arena while both are live (at step 0 (Embedding))");
}
TEST_F(PlanFile, RejectsOutputOverlappingItsInput) {
  rewriteMetadata(path_, [](fb::PlanT &p) { p.programs[1]->buffers[2]->offset_per_token = 8; });
  expectRejected("program 1: buffer 2 [8, 40) and buffer 1 [4, 36) bytes per token "
                 "overlap");
}
TEST_F(PlanFile, RejectsOverlapWithABufferLiveLater) {
  // Buffer 3 (written at step 2) over the logits, which live to the end.
  rewriteMetadata(path_, [](fb::PlanT &p) {
    p.programs[0]->buffers[4]->offset_per_token = 68;
    p.programs[0]->buffers[1]->offset_per_token = 100; // keeps the arena covered
  });
  expectRejected("buffer 4 [68, 132) and buffer 3 [68, 100) bytes per token overlap");
}
TEST_F(PlanFile, AcceptsBuffersSharingBytesWhenTheirLifetimesDoNotOverlap) {
  // Buffer 3 (steps 2..3) reuses buffer 1's bytes (steps 0..1); the logits
  // (3..end) reuse buffer 2's ((1..2) and more.
  rewriteMetadata(path_, [](fb::PlanT &p) {
    for (auto &program : p.programs) {
      program->buffers[3]->offset_per_token = 4;
      program->buffers[4]->offset_per_token = 36;
    }
  });
  auto plan = Plan::open(path_);
  EXPECT_TRUE(plan.isOk()) << plan.message();
}
TEST_F(PlanFile, RejectsMisalignedBufferOffset) {
  rewriteMetadata(path_, [](fb::PlanT &p) {
    p.programs[0]->buffers[1]->offset_per_token = 321;
    p.programs[0]->arena_bytes_per_token = 1024;
  });
  expectRejected("program 0: buffer 1 (F32) has offset_per_token 321, not a multiple of 4 bytes");
}
TEST_F(PlanFile, RejectsGpuBufferOffsetThatBreaksVectorLoads) {
  // The decode program as a GPU one: F32-aligned offsets (4, 36, ...) are not
  // enough there, the kernels load 16 bytes at once.
  rewriteMetadata(path_, [](fb::PlanT &p) {
    auto module = std::make_unique<fb::KernelModuleT>();
    module->target = fb::Target::Ptx;
    module->image = {'.', 0};
    module->functions = {"k"};
    p.modules.push_back(std::move(module));
    p.programs[1]->target = fb::Target::Ptx;
    for (auto &s : p.programs[1]->steps) {
      s->kernel = 0;
      s->grid = {1, 1, 1};
      s->block = {1, 1, 1};
    }
  });
  expectRejected("program 1: buffer 1 (F32) has offset_per_token 4, not a multiple of 16 bytes "
                 "(misaligned vector loads");
}

// --- What a plan may ask for.
TEST(PlanResources, RefusesAnUnusedSyntheticTensorEarlyWithItsSize) {
  const std::string path = test::scratchDir("plan-resources") + "/unused.plan";
  test::TinyPlan tiny = test::makeSyntheticTinyPlan();
  tiny.contents.meta.tensors.push_back(test::tensor("junk", {int64_t{1} << 30})); // 4 GiB f32
  auto init = std::make_unique<fb::SyntheticInitT>();
  init->kind = fb::SyntheticKind::Normal;
  init->std = 1.0f;
  tiny.contents.meta.tensors.back()->synthetic = std::move(init);
  WeightSource none;
  none.elements = uint64_t{1} << 30;
  tiny.contents.sources.push_back(none);
  ASSERT_TRUE(writePlan(path, tiny.contents).isOk());
  auto start = std::chrono::steady_clock::now();
  auto plan = Plan::open(path);
  ASSERT_FALSE(plan.isOk());
  EXPECT_NE(plan.message().find(path + ": synthetic tensor 3 'junk' asks for 4294967296 bytes "
                                       "(4.00 GiB) but no step uses it"),
            std::string::npos)
      << plan.message();
  // Refused from the metadata alone: nothing was generated.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}
TEST(PlanResources, SyntheticPlanThatUsesEveryTensorLoads) {
  const std::string path = test::scratchDir("plan-resources") + "/synthetic.plan";
  test::TinyPlan tiny = test::makeSyntheticTinyPlan();
  ASSERT_TRUE(writePlan(path, tiny.contents).isOk());
  auto plan = Plan::open(path);
  ASSERT_TRUE(plan.isOk()) << plan.message();
  EXPECT_EQ(syntheticWeightBytes(plan->meta()), (16u * 8 + 8 + 8 * 8) * 4);
}
TEST(PlanResources, HostMemoryCheckNamesEveryDemandAndTheLimit) {
  EXPECT_TRUE(checkHostMemory("p", {{"a", 10}, {"b", 20}}, 30).isOk());
  Status over =
      checkHostMemory("p", {{"synthetic weights", 1ull << 34}, {"KV cache", 8}}, 1ull << 33);
  ASSERT_FALSE(over.isOk());
  EXPECT_EQ(over.message(),
            "p: needs 17179869192 bytes of host memory (16.00 GiB: synthetic weights 17179869184 "
            "bytes, KV cache 8 bytes) but at most 8589934592 bytes (8.00 GiB, physical memory or "
            "the process's memory limit) are available");
  Status wraps = checkHostMemory("p", {{"a", ~0ull}, {"b", 2}}, ~0ull);
  ASSERT_FALSE(wraps.isOk());
  EXPECT_NE(wraps.message().find("needs more than 2^64 bytes"), std::string::npos);
  EXPECT_GT(usableHostMemoryBytes(), 0u);
}

// --- Files that are not regular files.
TEST(MappedFileTypes, RefusesAFifoWithoutBlocking) {
  const std::string fifo = test::scratchDir("plan-fifo") + "/engine.plan";
  std::filesystem::remove(fifo);
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  auto result = std::async(std::launch::async, [&] { return Plan::open(fifo).status(); });
  if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    // Unblock the reader (a writer with the FIFO open) so the test ends.
    int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    FAIL() << "opening a FIFO blocked";
    if (fd >= 0)
      ::close(fd);
  }
  Status status = result.get();
  ASSERT_FALSE(status.isOk());
  EXPECT_EQ(status.message(), fifo + ": is a FIFO (named pipe), not a regular file; give the "
                                     "path of a file on disk");
  auto text = readTextFile(fifo);
  ASSERT_FALSE(text.isOk());
  EXPECT_NE(text.message().find("FIFO"), std::string::npos);
}
TEST(MappedFileTypes, RefusesADirectoryAndACharacterDevice) {
  auto dir = MappedFile::open(test::scratchDir("plan-fifo"));
  ASSERT_FALSE(dir.isOk());
  EXPECT_NE(dir.message().find("is a directory, not a regular file"), std::string::npos);
  auto device = MappedFile::open("/dev/null");
  ASSERT_FALSE(device.isOk());
  EXPECT_EQ(device.message(), "/dev/null: is a character device, not a regular file; give the "
                              "path of a file on disk");
}

// --- Memory planner.
TEST(MemoryPlanner, ReusesBytesOfDeadBuffersAndNeverAliasesLiveOnes) {
  // a (0..1) feeds b (1..2) feeds c (2..3): c may reuse a's bytes, b may not.
  std::vector<BufferLifetime> buffers = {{256, 0, 1}, {256, 1, 2}, {256, 2, 3}, {64, 0, 3}};
  MemoryPlan plan = planMemory(buffers);
  auto overlaps = [&](size_t x, size_t y) {
    uint64_t xb = plan.offsetPerToken[x], xe = xb + buffers[x].bytesPerToken;
    uint64_t yb = plan.offsetPerToken[y], ye = yb + buffers[y].bytesPerToken;
    return xb < ye && yb < xe;
  };
  for (size_t x = 0; x < buffers.size(); ++x)
    for (size_t y = x + 1; y < buffers.size(); ++y) {
      bool live = buffers[x].firstStep <= buffers[y].lastStep &&
                  buffers[y].firstStep <= buffers[x].lastStep;
      if (live)
        EXPECT_FALSE(overlaps(x, y)) << x << " and " << y << " are live together";
    }
  EXPECT_EQ(plan.offsetPerToken[2], plan.offsetPerToken[0]);
  EXPECT_EQ(plan.arenaBytesPerToken, 256u + 256u + 64u);
}

} // namespace
} // namespace llmc
