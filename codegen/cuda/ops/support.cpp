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

namespace {

// `__device__ const float <name>[n] = {...};` of the pairs' inverse
// frequencies in a forward pass of length seqLen, as the CPU computes them.
std::string invFreqArray(const llmc::ops::RopeConfig &config, const std::string &name,
                         int seqLen) {
  const hd::RopeScaling scaling = config.kernelScaling();
  std::ostringstream table;
  table << "__device__ const float " << name << "[" << config.rotaryDim / 2 << "] = {";
  for (int i = 0; i < config.rotaryDim / 2; ++i)
    table << (i ? ", " : "")
          << floatLiteral(hd::ropeInvFreqAt(i, config.rotaryDim, config.theta, scaling, seqLen));
  table << "};\n";
  return table.str();
}

// The frequencies of a forward pass (R::invFreq's body): one table, or for
// the kinds that depend on the pass's length (rope.h) the table of a pass
// within the original length and, past it, longrope's long-factor table or
// dynamic NTK's grown base computed on the device (hd::ropeDynamicInvFreq,
// the CPU's function; device powf, so within a few ulp of the CPU's).
std::string invFreqBody(const llmc::ops::RopeConfig &config, const std::string &name,
                        std::string *tables) {
  const hd::RopeScaling &s = config.scaling;
  *tables = invFreqArray(config, name + "Table", 1);
  if (s.kind == hd::RopeScalingKind::LongRope) {
    // The long factors from the first length past the original one on.
    const int longLen = static_cast<int>(s.originalMaxPositions) + 1;
    *tables += invFreqArray(config, name + "LongTable", longLen);
    return "return static_cast<float>(seqLen) > " + floatLiteral(s.originalMaxPositions) +
           " ? " + name + "LongTable[pair] : " + name + "Table[pair];";
  }
  if (s.kind == hd::RopeScalingKind::Dynamic)
    return "if (static_cast<float>(seqLen) <= " + floatLiteral(s.originalMaxPositions) +
           ") return " + name + "Table[pair];\n    llmc::hd::RopeScaling s;\n    s.factor = " +
           floatLiteral(s.factor) + ";\n    s.originalMaxPositions = " +
           floatLiteral(s.originalMaxPositions) +
           ";\n    return llmc::hd::ropeDynamicInvFreq(pair, kRotaryDim, " +
           floatLiteral(config.theta) + ", s, seqLen);";
  return "return " + name + "Table[pair];";
}

} // namespace

Expected<std::string> ropeSpec(const StepView &v, const fb::RopeParamsT &rope, int64_t dim,
                               const std::string &name, std::string *hashTag) {
  const llmc::ops::RopeConfig config = llmc::ops::ropeConfig(rope);
  if (config.rotaryDim <= 0 || config.rotaryDim % 2 != 0 || config.rotaryDim > dim)
    return unsupported(v, "rotary_dim " + str(config.rotaryDim) + " for heads of " + str(dim));
  const hd::RopeScalingKind kind = config.scaling.kind;
  if (kind == hd::RopeScalingKind::LongRope &&
      (static_cast<int>(config.shortFactor.size()) != config.rotaryDim / 2 ||
       config.longFactor.size() != config.shortFactor.size()))
    return unsupported(v, "longrope factors of another length than rotary_dim / 2");
  std::string tables;
  const std::string body = invFreqBody(config, name, &tables);
  std::ostringstream spec;
  spec << tables << "struct " << name << " {\n"
       << "  static constexpr int kRotaryDim = " << config.rotaryDim << ";\n"
       << "  static constexpr bool kInterleaved = " << bool01(config.interleaved) << ";\n"
       << "  static constexpr float kAttentionFactor = "
       << floatLiteral(config.scaling.attentionFactor) << ";\n"
       << "  static constexpr bool kPerPass = " << bool01(config.dependsOnLength()) << ";\n"
       << "  static __device__ __forceinline__ float invFreq(int pair, int seqLen) {\n    "
       << (kind == hd::RopeScalingKind::LongRope || kind == hd::RopeScalingKind::Dynamic
               ? ""
               : "(void)seqLen;\n    ")
       << body << "\n  }\n};\n\n";
  const std::string text = spec.str();
  const uint64_t hash = fnv1a64(reinterpret_cast<const uint8_t *>(text.data()), text.size(),
                                0xcbf29ce484222325ull);
  char tagText[17];
  std::snprintf(tagText, sizeof(tagText), "%08x", static_cast<uint32_t>(hash ^ (hash >> 32)));
  *hashTag = tagText;
  return text;
}

} // namespace llmc::cuda::ops
