// What the per-op generators share (ops.h).
#include "cuda/ops/ops.h"

#include "kernels/common/rope.h"
#include "ops/rope.h"
#include "plan/plan_format.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace llmc::cuda::ops {

Status unsupported(const StepView &v, const std::string &why) {
  return Status::error("no CUDA kernel for " + v.op() + ": " + why);
}

std::string str(int64_t v) { return std::to_string(v); }

int64_t roundUp(int64_t v, int64_t multiple) { return (v + multiple - 1) / multiple * multiple; }
int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

const char *tag(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  default:
    return "unsupported";
  }
}

bool isFloat(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

std::string floatLiteral(float v) {
  char text[64];
  std::snprintf(text, sizeof(text), "%af", static_cast<double>(v));
  return text;
}

std::string floatTag(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  char text[16];
  std::snprintf(text, sizeof(text), "%08x", bits);
  return text;
}

std::string bool01(bool b) { return b ? "true" : "false"; }

int vectorWidth(int64_t count, std::initializer_list<size_t> sizes) {
  size_t widest = 1;
  for (size_t s : sizes)
    widest = std::max(widest, s);
  int vec = static_cast<int>(16 / widest);
  while (vec > 1 && count % vec != 0)
    vec /= 2;
  return vec;
}

std::string translationUnit(const std::string &name, const std::string &summary,
                            const std::string &header, const std::string &declarations, int threads,
                            const std::string &argsType, const std::string &call) {
  std::ostringstream s;
  s << "// llmc generated kernel: " << summary << "\n"
    << "#include \"llmc/" << header << "\"\n\n"
    << declarations << "extern \"C\" __global__ void __launch_bounds__(" << threads << ") " << name
    << "(const llmc::abi::" << argsType << " args) {\n  " << call << ";\n}\n";
  return s.str();
}

void perRowGrid(LaunchShape &l, uint32_t threads, uint32_t rowsPerBlock) {
  l.block = {threads, 1, 1};
  l.grid = {1, 1, 1};
  l.tokenAxis = 1;
  l.tokensPerBlock = rowsPerBlock;
}

Expected<std::string> invFreqTable(const StepView &v, const fb::RopeParamsT &rope, int64_t dim,
                                   const std::string &name, std::string *hashTag) {
  const llmc::ops::RopeConfig config = llmc::ops::ropeConfig(rope);
  if (config.interleaved)
    return unsupported(v, "interleaved RoPE pairs");
  if (config.rotaryDim != dim)
    return unsupported(v, "partial rotary (rotary_dim " + str(config.rotaryDim) + " of " +
                              str(dim) + ")");
  // The generated kernels bake one inverse-frequency table and compute cos/sin
  // from it: frequencies chosen per forward pass (dynamic NTK, longrope) or
  // an attention factor on cos/sin (yarn, longrope) are not in them yet.
  if (config.dependsOnLength())
    return unsupported(v, std::string(config.scaling.kind == hd::RopeScalingKind::Dynamic
                                          ? "dynamic NTK"
                                          : "longrope") +
                              " RoPE (frequencies chosen per forward pass)");
  if (config.scaling.attentionFactor != 1.0f)
    return unsupported(v, "RoPE with an attention factor (yarn) on cos/sin");
  std::ostringstream table;
  uint64_t hash = 0xcbf29ce484222325ull;
  table << "__device__ const float " << name << "[" << dim / 2 << "] = {";
  for (int i = 0; i < dim / 2; ++i) {
    float f = hd::ropeInvFreq(i, config.rotaryDim, config.theta, config.scaling);
    table << (i ? ", " : "") << floatLiteral(f);
    hash = fnv1a64(reinterpret_cast<const uint8_t *>(&f), sizeof(f), hash);
  }
  table << "};\n\n";
  char text[17];
  std::snprintf(text, sizeof(text), "%08x", static_cast<uint32_t>(hash ^ (hash >> 32)));
  *hashTag = text;
  return table.str();
}

} // namespace llmc::cuda::ops
