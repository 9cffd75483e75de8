// The NVRTC kernel cache (codegen/cuda/nvrtc_compiler.cpp) without a GPU:
// entries are keyed by the SHA-256 of the full compilation material, a hit
// is used only when the stored material and file digests match, and a
// corrupt file or another kernel's entry under the key recompiles.
#include "cuda/nvrtc_compiler.h"

#include "common/test_paths.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace llmc {
namespace {

namespace fs = std::filesystem;

cuda::KernelInstance doubling(const std::string &name, const std::string &factor) {
  cuda::KernelInstance k;
  k.name = name;
  k.source = "extern \"C\" __global__ void " + name + "(float *x) { x[threadIdx.x] *= " + factor +
             "; }\n";
  return k;
}

// The one entry's files in `dir`, by extension.
std::map<std::string, fs::path> entryFiles(const std::string &dir) {
  std::map<std::string, fs::path> files;
  for (const auto &f : fs::directory_iterator(dir))
    files[f.path().extension().string()] = f.path();
  return files;
}

std::string slurp(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(KernelCache, HitsAreCheckedAndBadEntriesRecompile) {
  const std::string dir = test::scratchDir("kernel-cache");
  const cuda::KernelInstance a = doubling("llmc_cache_test_a", "2.0f");
  auto first = cuda::compileKernel(a, fb::Target::Ptx, dir);
  ASSERT_TRUE(first.isOk()) << first.message();
  EXPECT_FALSE(first->fromCache);
  auto files = entryFiles(dir);
  ASSERT_EQ(files.size(), 3u); // .ptx, .log, .src
  ASSERT_TRUE(files.count(".ptx") && files.count(".log") && files.count(".src"));
  EXPECT_EQ(files[".ptx"].stem().string().size(), 64u); // a SHA-256 in hex
  EXPECT_NE(slurp(files[".src"]).find(a.source), std::string::npos); // the full source is kept

  auto hit = cuda::compileKernel(a, fb::Target::Ptx, dir);
  ASSERT_TRUE(hit.isOk());
  EXPECT_TRUE(hit->fromCache);
  EXPECT_EQ(hit->image, first->image);

  // A corrupt image: recompiled, and the entry rewritten.
  std::string image = slurp(files[".ptx"]);
  image[image.size() / 2] ^= 0x20;
  std::ofstream(files[".ptx"], std::ios::binary | std::ios::trunc) << image;
  auto repaired = cuda::compileKernel(a, fb::Target::Ptx, dir);
  ASSERT_TRUE(repaired.isOk());
  EXPECT_FALSE(repaired->fromCache);
  EXPECT_EQ(repaired->image, first->image);
  auto again = cuda::compileKernel(a, fb::Target::Ptx, dir);
  ASSERT_TRUE(again.isOk());
  EXPECT_TRUE(again->fromCache);

  // Another kernel's complete entry under a's key (what a key collision
  // would look like): its stored source differs, so a is compiled afresh.
  const std::string other = test::scratchDir("kernel-cache-other");
  const cuda::KernelInstance b = doubling("llmc_cache_test_a", "3.0f"); // same name, other source
  auto bCompiled = cuda::compileKernel(b, fb::Target::Ptx, other);
  ASSERT_TRUE(bCompiled.isOk()) << bCompiled.message();
  ASSERT_NE(bCompiled->image, first->image);
  for (const auto &[extension, path] : entryFiles(other))
    fs::copy_file(path, files[extension], fs::copy_options::overwrite_existing);
  auto collided = cuda::compileKernel(a, fb::Target::Ptx, dir);
  ASSERT_TRUE(collided.isOk());
  EXPECT_FALSE(collided->fromCache);
  EXPECT_EQ(collided->image, first->image);

  // A truncated record of the material, and a missing one.
  std::string source = slurp(files[".src"]);
  std::ofstream(files[".src"], std::ios::binary | std::ios::trunc)
      << source.substr(0, source.size() - 10);
  auto truncated = cuda::compileKernel(a, fb::Target::Ptx, dir);
  ASSERT_TRUE(truncated.isOk());
  EXPECT_FALSE(truncated->fromCache);
  fs::remove(files[".src"]);
  auto missing = cuda::compileKernel(a, fb::Target::Ptx, dir);
  ASSERT_TRUE(missing.isOk());
  EXPECT_FALSE(missing->fromCache);
  EXPECT_TRUE(fs::exists(files[".src"]));
}

} // namespace
} // namespace llmc
