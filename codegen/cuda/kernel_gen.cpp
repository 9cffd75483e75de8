#include "cuda/kernel_gen.h"

#include "cuda/kernel_abi.h"
#include "kernels/common/rope.h"
#include "plan/plan.h"
#include "plan/plan_format.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace llmc::cuda {
namespace {

constexpr int kSmCount = 132; // H100/H200 SXM: split work until the grid covers this twice

std::string str(int64_t v) { return std::to_string(v); }

int64_t roundUp(int64_t v, int64_t multiple) { return (v + multiple - 1) / multiple * multiple; }
int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The short dtype tag used in kernel names.
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

// A float as an exact C++ literal (hex float) and as a name-safe tag.
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

// The largest number of elements per vector access: at most 16 bytes of
// every dtype in `sizes`, and dividing `count`.
int vectorWidth(int64_t count, std::initializer_list<size_t> sizes) {
  size_t widest = 1;
  for (size_t s : sizes)
    widest = std::max(widest, s);
  int vec = static_cast<int>(16 / widest);
  while (vec > 1 && count % vec != 0)
    vec /= 2;
  return vec;
}

std::string bool01(bool b) { return b ? "true" : "false"; }

// Assembles one translation unit: a header comment, includes, extra
// declarations and an entry point forwarding to a template.
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

struct StepView {
  const fb::PlanT &plan;
  const fb::ProgramT &program;
  const fb::StepT &step;
  const ProgramShape &shape;

  const fb::BufferT &buffer(int index) const { return *program.buffers.at(index); }
  const fb::BufferT &input(int i) const { return buffer(step.inputs.at(i)); }
  const fb::BufferT &output() const { return buffer(step.outputs.at(0)); }
  const fb::TensorT &weight(int i) const { return *plan.tensors.at(step.weights.at(i)); }
  // The step's optional parameters (engine.fbs: offset, scale, softcap, window, gate).
  StepExtras extras() const { return stepExtras(step); }
  DType dtype(const fb::BufferT &b) const { return static_cast<DType>(b.dtype); }
  DType weightDType(int i) const { return static_cast<DType>(weight(i).dtype); }
  std::string op() const { return fb::EnumNameOpKind(step.op); }
};

Status unsupported(const StepView &v, const std::string &why) {
  return Status::error("no CUDA kernel for " + v.op() + ": " + why);
}

// Grid axis x covers the rows, `rowsPerBlock` per block.
void perRowGrid(LaunchShape &l, uint32_t threads, uint32_t rowsPerBlock = 1) {
  l.block = {threads, 1, 1};
  l.grid = {1, 1, 1};
  l.tokenAxis = 1;
  l.tokensPerBlock = rowsPerBlock;
}

Expected<KernelInstance> embedding(const StepView &v) {
  DType w = v.weightDType(0), a = v.dtype(v.output());
  int64_t vocab = v.weight(0).shape.at(0), hidden = v.weight(0).shape.at(1);
  int threads = static_cast<int>(std::clamp<int64_t>(roundUp(hidden, 32), 32, 256));
  const float scale = static_cast<float>(v.extras().embeddingScale);
  KernelInstance k;
  k.name = "llmc_embedding_" + std::string(tag(a)) + "_w" + tag(w) + "_v" + str(vocab) + "_h" +
           str(hidden) + (scale != 1.0f ? "_x" + floatTag(scale) : "");
  k.source =
      translationUnit(k.name, "Embedding table[" + str(vocab) + ", " + str(hidden) + "]",
                      "elementwise.cuh", "", threads, "StepArgs",
                      "llmc::dev::embedding<" + std::string(deviceType(w)) + ", " + deviceType(a) +
                          ", " + str(hidden) + ", " + str(vocab) + ", " + str(threads) + ">(args" +
                          (scale != 1.0f ? ", " + floatLiteral(scale) : "") + ")");
  perRowGrid(k.launch, threads);
  return k;
}

Expected<KernelInstance> rmsNorm(const StepView &v) {
  DType a = v.dtype(v.output()), w = v.weightDType(0);
  int64_t hidden = v.output().width;
  float eps = static_cast<float>(v.step.float_params.at(0));
  const float offset = static_cast<float>(v.extras().normOffset);
  int threads = static_cast<int>(std::clamp<int64_t>(roundUp(ceilDiv(hidden, 8), 32), 32, 1024));
  KernelInstance k;
  k.name = "llmc_rms_norm_" + std::string(tag(a)) + "_w" + tag(w) + "_h" + str(hidden) + "_eps" +
           floatTag(eps) + (offset != 0.0f ? "_off" + floatTag(offset) : "");
  k.source = translationUnit(
      k.name, "RMSNorm hidden " + str(hidden), "elementwise.cuh", "", threads, "StepArgs",
      "llmc::dev::rmsNorm<" + std::string(deviceType(a)) + ", " + deviceType(w) + ", " +
          str(hidden) + ", " + str(threads) + ">(args, " + floatLiteral(eps) +
          (offset != 0.0f ? ", " + floatLiteral(offset) : "") + ")");
  perRowGrid(k.launch, threads);
  return k;
}

hd::RopeScaling ropeScaling(const fb::ModelInfoT &m) {
  hd::RopeScaling s;
  s.kind = static_cast<hd::RopeScalingKind>(static_cast<int>(m.rope_scaling));
  s.factor = static_cast<float>(m.rope_factor);
  s.lowFreqFactor = static_cast<float>(m.rope_low_freq_factor);
  s.highFreqFactor = static_cast<float>(m.rope_high_freq_factor);
  s.originalMaxPositions = static_cast<float>(m.rope_original_max_positions);
  return s;
}

// The inverse frequencies of the model's RoPE, exactly as the CPU backend
// computes them (cpu::ropeInvFreqs), as a __device__ table named `name`,
// and a short hash of them for kernel names.
std::string invFreqTable(const fb::ModelInfoT &m, int64_t dim, const std::string &name,
                         std::string *hashTag) {
  hd::RopeScaling scaling = ropeScaling(m);
  std::ostringstream table;
  uint64_t hash = 0xcbf29ce484222325ull;
  table << "__device__ const float " << name << "[" << dim / 2 << "] = {";
  for (int i = 0; i < dim / 2; ++i) {
    float f = hd::ropeInvFreq(i, static_cast<int>(dim), static_cast<float>(m.rope_theta), scaling);
    table << (i ? ", " : "") << floatLiteral(f);
    hash = fnv1a64(reinterpret_cast<const uint8_t *>(&f), sizeof(f), hash);
  }
  table << "};\n\n";
  char text[17];
  std::snprintf(text, sizeof(text), "%08x", static_cast<uint32_t>(hash ^ (hash >> 32)));
  *hashTag = text;
  return table.str();
}

// Rope (in place on [T, heads * D]) and RopeColumns (heads from a column of
// a wider buffer).
Expected<KernelInstance> rope(const StepView &v) {
  DType a = v.dtype(v.output());
  int64_t heads = v.step.int_params.at(0), dim = v.step.int_params.at(1);
  bool columns = v.step.op == fb::OpKind::RopeColumns;
  int64_t column = columns ? v.step.int_params.at(2) : 0;
  int64_t stride = v.output().width;
  KernelInstance k;
  std::string hashTag;
  int threads = static_cast<int>(std::clamp<int64_t>(roundUp(heads * dim / 2, 32), 32, 256));
  k.name = "llmc_rope_" + std::string(tag(a)) + "_heads" + str(heads) + "_d" + str(dim) +
           (columns ? "_w" + str(stride) + "_c" + str(column) : "");
  std::string table = invFreqTable(*v.plan.model, dim, "kInvFreq", &hashTag);
  k.name += "_f" + hashTag;
  k.source = translationUnit(
      k.name,
      "RoPE " + str(heads) + " heads of " + str(dim) + " from column " + str(column) + " of " +
          str(stride) + ", theta " + std::to_string(v.plan.model->rope_theta),
      "elementwise.cuh", table, threads, "StepArgs",
      "llmc::dev::rope<" + std::string(deviceType(a)) + ", " + str(heads) + ", " + str(dim) + ", " +
          str(stride) + ", " + str(column) + ", " + str(threads) + ">(args, kInvFreq)");
  perRowGrid(k.launch, threads);
  return k;
}

Expected<KernelInstance> pointwise(const StepView &v) {
  DType a = v.dtype(v.output());
  int64_t width = v.output().width;
  const char *op = nullptr, *name = nullptr;
  switch (v.step.op) {
  case fb::OpKind::Add:
    op = "Add", name = "add";
    break;
  case fb::OpKind::Mul:
    op = "Mul", name = "mul";
    break;
  case fb::OpKind::Silu:
    op = "Silu", name = "silu";
    break;
  case fb::OpKind::SwiGlu:
    op = "SwiGlu", name = "swiglu";
    break;
  case fb::OpKind::Gelu:
    if (v.step.int_params.at(0) == 1)
      op = "GeluTanh", name = "gelu_tanh";
    else
      op = "GeluErf", name = "gelu_erf";
    break;
  default:
    return unsupported(v, "not a point-wise op");
  }
  int vec = vectorWidth(width, {dtypeSize(a)});
  int threads = static_cast<int>(std::clamp<int64_t>(roundUp(width / vec, 32), 32, 256));
  KernelInstance k;
  k.name = "llmc_" + std::string(name) + "_" + tag(a) + "_w" + str(width);
  k.source = translationUnit(k.name, std::string(op) + " over rows of " + str(width),
                             "elementwise.cuh", "", threads, "StepArgs",
                             "llmc::dev::pointwiseRows<llmc::dev::Pointwise::" + std::string(op) +
                                 ", " + deviceType(a) + ", " + str(width) + ", " + str(vec) + ", " +
                                 str(threads) + ">(args)");
  perRowGrid(k.launch, threads);
  return k;
}

// How a linear-family op kind is fused (gemv.cuh, gemm.cuh).
struct LinearForm {
  const char *family;
  bool norm = false, swiglu = false, gather = false, q4 = false;
  int matrix = 0;          // weight index of W (or of qweight)
  int biasWeights = 0;     // weight count that includes a bias
  bool accumulate = false; // int_params[0] is the accumulate flag
};

LinearForm linearForm(fb::OpKind op) {
  switch (op) {
  case fb::OpKind::Logits:
    return {"logits", false, false, true, false, 0, 99, false};
  case fb::OpKind::LmHead:
    return {"lm_head", true, false, true, false, 1, 99, false};
  case fb::OpKind::RmsNormLinear:
    return {"norm_linear", true, false, false, false, 1, 3, true};
  case fb::OpKind::LinearSwiGlu:
    return {"linear_swiglu", false, true, false, false, 0, 99, false};
  case fb::OpKind::RmsNormLinearSwiGlu:
    return {"norm_linear_swiglu", true, true, false, false, 1, 99, false};
  case fb::OpKind::LinearQ4:
    return {"linear_q4", false, false, false, true, 0, 4, true};
  case fb::OpKind::RmsNormLinearQ4:
    return {"norm_linear_q4", true, false, false, true, 1, 99, true};
  case fb::OpKind::LinearSwiGluQ4:
    return {"linear_swiglu_q4", false, true, false, true, 0, 99, false};
  case fb::OpKind::RmsNormLinearSwiGluQ4:
    return {"norm_linear_swiglu_q4", true, true, false, true, 1, 99, false};
  default:
    return {"linear", false, false, false, false, 0, 2, true};
  }
}

// The linear family: a GEMV for decode programs (few rows), else a GEMM.
Expected<KernelInstance> linear(const StepView &v) {
  const LinearForm f = linearForm(v.step.op);
  DType a = v.dtype(v.input(0)), w = v.weightDType(f.matrix), out = v.dtype(v.output());
  DType g = f.norm ? v.weightDType(0) : DType::F32;
  int64_t kDim = v.input(0).width;
  int64_t n = f.q4 ? v.output().width : v.weight(f.matrix).shape.at(0) / (f.swiglu ? 2 : 1);
  int64_t group = f.q4 ? v.step.int_params.at(f.accumulate ? 1 : 0) : 0;
  bool accumulate = f.accumulate && v.step.int_params.at(0) == 1;
  bool bias = static_cast<int>(v.step.weights.size()) == f.biasWeights;
  DType b = bias ? v.weightDType(f.biasWeights - 1) : DType::F32;
  float eps = f.norm ? static_cast<float>(v.step.float_params.at(0)) : 0.0f;
  const StepExtras extras = v.extras();
  const float gammaOffset = f.norm ? static_cast<float>(extras.normOffset) : 0.0f;
  const float softcap = static_cast<float>(extras.softcap);
  const int64_t gate = f.swiglu ? extras.gate : 0;
  if (n > INT32_MAX / 4 || kDim > INT32_MAX / 4)
    return unsupported(v, "shape [" + str(n) + ", " + str(kDim) + "] too large");
  if (f.q4 && (group <= 0 || group % 32 != 0))
    return unsupported(v, "int4 group size " + str(group) + " is not a multiple of 32");
  std::string suffix = std::string(bias ? std::string("_bias") + tag(b) : "") +
                       (accumulate ? "_acc" : "") + (f.norm ? "_eps" + floatTag(eps) : "") +
                       (gammaOffset != 0.0f ? "_off" + floatTag(gammaOffset) : "") +
                       (softcap != 0.0f ? "_cap" + floatTag(softcap) : "") +
                       (gate != 0 ? "_gate" + str(gate) : "");
  std::string dtypes = std::string(tag(a)) +
                       (f.q4     ? "_wq4g" + str(group)
                        : w != a ? std::string("_w") + tag(w)
                                 : "") +
                       (out != a ? std::string("_o") + tag(out) : "");
  std::string summary = std::string(fb::EnumNameOpKind(v.step.op)) + " [" + str(n) + ", " +
                        str(kDim) + "], " + (f.q4 ? "int4" : tag(w)) + " weights";
  std::string weightType = f.q4 ? "float" : deviceType(w);
  std::string types = std::string(deviceType(a)) + ", " + weightType + ", " + deviceType(out) +
                      ", " + deviceType(b) + ", " + deviceType(g);
  // GATE only when not silu, the run-time offset and softcap only when set:
  // kernels of models without them stay as they were.
  std::string gateArg = gate != 0 ? ", " + str(gate) : "";
  std::string flags = bool01(accumulate) + ", " + bool01(bias) + ", " + bool01(f.gather) + ", " +
                      bool01(f.norm) + ", " + bool01(f.swiglu) + gateArg;
  std::string epsArg = floatLiteral(eps) +
                       (gammaOffset != 0.0f || softcap != 0.0f ? ", " + floatLiteral(gammaOffset)
                                                               : "") +
                       (softcap != 0.0f ? ", " + floatLiteral(softcap) : "");
  KernelInstance k;
  if (v.shape.maxTokens > 0 && f.q4) {
    const int64_t tmax = v.shape.maxTokens, warps = 4, rows = tmax <= 4 && !f.swiglu ? 2 : 1;
    k.name = "llmc_" + std::string(f.family) + "_gemv_" + dtypes + "_n" + str(n) + "_k" +
             str(kDim) + "_t" + str(tmax) + suffix;
    k.source = translationUnit(
        k.name, summary + ", decode GEMV for T <= " + str(tmax), "gemv.cuh", "",
        static_cast<int>(warps * 32), "StepArgs",
        "llmc::dev::gemvQ4<" + std::string(deviceType(a)) + ", " + deviceType(out) + ", " +
            deviceType(b) + ", " + deviceType(g) + ", " + str(n) + ", " + str(kDim) + ", " +
            str(group) + ", " + str(tmax) + ", " + str(rows) + ", " + str(warps) + ", " +
            bool01(accumulate) + ", " + bool01(bias) + ", " + bool01(f.norm) + ", " +
            bool01(f.swiglu) + gateArg + ">(args, " + floatLiteral(eps) +
            (gammaOffset != 0.0f ? ", " + floatLiteral(gammaOffset) : "") + ")");
    k.launch.block = {static_cast<uint32_t>(warps * 32), 1, 1};
    k.launch.grid = {static_cast<uint32_t>(ceilDiv(n, warps * rows)), 1, 1};
    return k;
  }
  if (v.shape.maxTokens > 0) {
    // 16-byte weight loads (gamma, f32, comes in as many 16-byte pieces),
    // UNROLL x WR of them per lane in flight: 4 KB per warp at T = 1 without
    // a norm, else 2 KB for T <= 4 (more costs the registers that keep the
    // grid in one wave: 107 instead of 61 for the norm forms at T = 1).
    const int64_t tmax = v.shape.maxTokens, warps = 4, rows = f.swiglu ? 1 : 2;
    const int unroll = tmax == 1 && !f.norm ? 4 : tmax <= 4 ? 2 : 1;
    int vec = vectorWidth(kDim, {dtypeSize(a), dtypeSize(w)});
    int64_t blocks = ceilDiv(n, warps * rows), splitK = 1;
    while (blocks * splitK < 2 * kSmCount && splitK < 16 && (kDim / vec) % (2 * splitK) == 0 &&
           (kDim / vec) / (2 * splitK) >= 32 * unroll)
      splitK *= 2;
    k.name = "llmc_" + std::string(f.family) + "_gemv_" + dtypes + "_n" + str(n) + "_k" +
             str(kDim) + "_t" + str(tmax) + (splitK > 1 ? "_s" + str(splitK) : "") + suffix;
    k.source = translationUnit(k.name, summary + ", decode GEMV for T <= " + str(tmax), "gemv.cuh",
                               "", static_cast<int>(warps * 32), "StepArgs",
                               "llmc::dev::gemv<" + types + ", " + str(n) + ", " + str(kDim) +
                                   ", " + str(tmax) + ", " + str(rows) + ", " + str(warps) + ", " +
                                   str(splitK) + ", " + str(vec) + ", " + str(unroll) + ", " +
                                   flags + ">(args, " + epsArg + ")");
    k.launch.block = {static_cast<uint32_t>(warps * 32), 1, 1};
    k.launch.grid = {static_cast<uint32_t>(blocks), static_cast<uint32_t>(splitK), 1};
    if (splitK > 1) {
      int64_t weightRows = f.swiglu ? 2 * n : n;
      k.launch.workspaceBytesPerToken =
          static_cast<uint64_t>((splitK * weightRows + blocks * splitK) * 4);
      k.launch.countersPerToken = static_cast<uint64_t>(blocks);
    }
    return k;
  }
  // Tensor cores for bf16 activations with bf16 weights, or int4 ones
  // dequantized to bf16 as the tile loads them.
  bool mma = a == DType::BF16 && (f.q4 || w == DType::BF16) && kDim % 8 == 0 &&
             (!f.norm || g == DType::F32);
  int tile = mma ? 128 : 64;
  int outCols = f.swiglu ? tile / 2 : tile;
  k.name = "llmc_" + std::string(f.family) + "_gemm_" + (mma ? "mma_" : "fma_") + dtypes + "_n" +
           str(n) + "_k" + str(kDim) + suffix;
  std::string call = mma ? "llmc::dev::gemmMma<" + std::string(deviceType(out)) + ", " +
                               deviceType(b) + ", " + deviceType(g) + ", " + str(n) + ", " +
                               str(kDim) + ", " + str(group) + ", " + flags + ">(args, " + epsArg +
                               ")"
                         : "llmc::dev::gemmFma<" + types + ", " + str(n) + ", " + str(kDim) + ", " +
                               str(group) + ", " + flags + ">(args, " + epsArg + ")";
  k.source = translationUnit(k.name, summary + (mma ? ", tensor-core GEMM" : ", FMA GEMM"),
                             "gemm.cuh", "", 256, "StepArgs", call);
  k.launch.block = {256, 1, 1};
  k.launch.grid = {static_cast<uint32_t>(ceilDiv(n, outCols)), 1, 1};
  k.launch.tokenAxis = 2;
  k.launch.tokensPerBlock = static_cast<uint32_t>(tile);
  return k;
}

// Attention and RopeAttention (q, k, v from columns of possibly packed
// buffers; RoPE on the fly).
Expected<KernelInstance> attention(const StepView &v) {
  DType a = v.dtype(v.output());
  for (int i = 0; i < 3; ++i)
    if (v.dtype(v.input(i)) != a)
      return unsupported(v, "q, k, v and the output must share one dtype");
  bool fused = v.step.op == fb::OpKind::RopeAttention;
  int64_t heads = v.step.int_params.at(1), kvHeads = v.step.int_params.at(2),
          dim = v.step.int_params.at(3);
  int64_t qCol = fused ? v.step.int_params.at(4) : 0, kCol = fused ? v.step.int_params.at(5) : 0,
          vCol = fused ? v.step.int_params.at(6) : 0;
  bool rope = fused && v.step.int_params.at(7) != 0;
  int64_t qStride = v.input(0).width, kStride = v.input(1).width, vStride = v.input(2).width;
  int64_t group = heads / kvHeads;
  int64_t blockSize = v.plan.kv_cache->block_size;
  int64_t maxSeq = v.plan.model->max_seq_len;
  float scale = static_cast<float>(v.step.float_params.at(0));
  // Sliding window and soft-capping (kernels/common/attention_scores.h), 0: off.
  const StepExtras extras = v.extras();
  int64_t window = extras.window;
  float softcap = static_cast<float>(extras.softcap);
  const int warps = 4, chunk = 32;
  int vec = vectorWidth(dim, {dtypeSize(a)});
  for (int64_t x : {qStride, kStride, vStride, qCol, kCol, vCol})
    while (vec > 1 && x % vec != 0)
      vec /= 2;
  // Prefill tiles of rows share each K/V chunk: 32 query vectors per block.
  int64_t rowsPerBlock = v.shape.decode ? 1 : std::max<int64_t>(1, 32 / group);
  // Decode: the grid has room for `splits` splits per KV head, enough for
  // the heads to cover the SMs twice (32 for 8 KV heads); how many work,
  // and on how many positions each, the kernel decides from the context
  // (hd::decodeSplits), so short contexts spread too and max_seq does not
  // fix the split length.
  int64_t splits = 1;
  if (v.shape.decode) {
    int64_t wanted = std::max<int64_t>(1, 2 * kSmCount / kvHeads);
    while (splits * 2 <= std::min<int64_t>(wanted, 64))
      splits *= 2;
    splits = std::min(splits, ceilDiv(maxSeq, chunk));
  }
  uint64_t sharedFloats = chunk * (dim + 1) + chunk * dim + rowsPerBlock * group * dim;
  std::string table, hashTag;
  if (rope)
    table = invFreqTable(*v.plan.model, dim, "kInvFreq", &hashTag);
  else
    table = "__device__ const float kInvFreq[1] = {0.0f};\n\n";
  KernelInstance k;
  k.name = "llmc_attention_" + std::string(v.shape.decode ? "decode_" : "prefill_") + tag(a) +
           "_d" + str(dim) + "_g" + str(group) + "_kv" + str(kvHeads) + "_bs" + str(blockSize) +
           "_bm" + str(rowsPerBlock) +
           (splits > 1 ? "_s" + str(splits) : "") + "_sc" + floatTag(scale) +
           (window > 0 ? "_w" + str(window) : "") +
           (softcap > 0.0f ? "_cap" + floatTag(softcap) : "") +
           (fused ? "_q" + str(qStride) + "c" + str(qCol) + "_k" + str(kStride) + "c" + str(kCol) +
                        "_v" + str(vStride) + "c" + str(vCol)
                  : "") +
           (rope ? "_rope" + hashTag : "");
  k.source = translationUnit(k.name,
                             std::string(v.shape.decode ? "flash-decoding" : "tiled prefill") +
                                 " attention, " + str(heads) + " heads / " + str(kvHeads) +
                                 " KV heads of " + str(dim) + (rope ? ", RoPE on the fly" : ""),
                             "attention.cuh", table, warps * 32, "StepArgs",
                             "llmc::dev::attention<" + std::string(deviceType(a)) + ", " +
                                 str(dim) + ", " + str(group) + ", " + str(kvHeads) + ", " +
                                 str(rowsPerBlock) + ", " + str(splits) + ", " + str(blockSize) +
                                 ", " + str(vec) + ", " + str(warps) +
                                 ", " + str(qStride) + ", " + str(kStride) + ", " + str(vStride) +
                                 ", " + str(qCol) + ", " + str(kCol) + ", " + str(vCol) + ", " +
                                 bool01(rope) + ">(args, " + floatLiteral(scale) + ", kInvFreq, " +
                                 str(window) + ", " + floatLiteral(softcap) + ")");
  k.launch.block = {static_cast<uint32_t>(warps * 32), 1, 1};
  k.launch.grid = {1, static_cast<uint32_t>(kvHeads), static_cast<uint32_t>(splits)};
  k.launch.tokenAxis = 1;
  k.launch.tokensPerBlock = static_cast<uint32_t>(rowsPerBlock);
  k.launch.sharedBytes = static_cast<uint32_t>(sharedFloats * 4);
  if (splits > 1) {
    k.launch.workspaceBytesPerToken = static_cast<uint64_t>(heads * splits * (dim + 2) * 4);
    k.launch.countersPerToken = static_cast<uint64_t>(kvHeads);
  }
  return k;
}

} // namespace

const char *deviceType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "float";
  case DType::F16:
    return "llmc::dev::f16";
  case DType::BF16:
    return "llmc::dev::bf16";
  default:
    return "unsupported_dtype";
  }
}

Expected<KernelInstance> kernelForStep(const fb::PlanT &plan, const fb::ProgramT &program,
                                       const fb::StepT &step, const ProgramShape &shape) {
  StepView v{plan, program, step, shape};
  const LinearForm form = linearForm(step.op);
  for (size_t i = 0; i < step.weights.size(); ++i) // int4: qweight I32, scales/zeros F16
    if (!(form.q4 && static_cast<int>(i) >= form.matrix && static_cast<int>(i) < form.matrix + 3))
      if (!isFloat(v.weightDType(static_cast<int>(i))))
        return unsupported(v, "weight '" + v.weight(static_cast<int>(i)).name + "' has dtype " +
                                  std::string(dtypeName(v.weightDType(static_cast<int>(i)))));
  DType out = v.dtype(v.output());
  bool logits = step.op == fb::OpKind::Logits || step.op == fb::OpKind::LmHead;
  if (logits ? out != DType::F32 : (out != DType::F32 && out != DType::BF16))
    return unsupported(v, "output dtype " + std::string(dtypeName(out)));
  switch (step.op) {
  case fb::OpKind::Embedding:
    return embedding(v);
  case fb::OpKind::RmsNorm:
    return rmsNorm(v);
  case fb::OpKind::Linear:
  case fb::OpKind::Logits:
  case fb::OpKind::LinearQ4:
  case fb::OpKind::RmsNormLinearQ4:
  case fb::OpKind::LinearSwiGluQ4:
  case fb::OpKind::RmsNormLinearSwiGluQ4:
  case fb::OpKind::RmsNormLinear:
  case fb::OpKind::LinearSwiGlu:
  case fb::OpKind::RmsNormLinearSwiGlu:
  case fb::OpKind::LmHead:
    return linear(v);
  case fb::OpKind::Rope:
  case fb::OpKind::RopeColumns:
    return rope(v);
  case fb::OpKind::Attention:
  case fb::OpKind::RopeAttention:
    return attention(v);
  case fb::OpKind::Add:
  case fb::OpKind::Mul:
  case fb::OpKind::Silu:
  case fb::OpKind::SwiGlu:
  case fb::OpKind::Gelu:
    return pointwise(v);
  }
  return unsupported(v, "unknown op kind");
}

std::string syntheticFillKernelName(DType dtype) {
  return std::string("llmc_synthetic_fill_") + tag(dtype);
}

KernelInstance syntheticFillKernel(DType dtype) {
  KernelInstance k;
  k.name = syntheticFillKernelName(dtype);
  k.source =
      translationUnit(k.name, std::string("synthetic weights, ") + tag(dtype), "elementwise.cuh",
                      "", 256, "SyntheticFillArgs",
                      "llmc::dev::syntheticFill<" + std::string(deviceType(dtype)) + ">(args)");
  k.launch.block = {256, 1, 1};
  return k;
}

KernelInstance syntheticFillQ4Kernel() {
  KernelInstance k;
  k.name = abi::kSyntheticFillQ4Kernel;
  k.source = translationUnit(k.name, "synthetic int4 weights (RTN coding)", "elementwise.cuh", "",
                             256, "SyntheticFillArgs", "llmc::dev::syntheticFillQ4(args)");
  k.launch.block = {256, 1, 1};
  return k;
}

KernelInstance topKKernel() {
  KernelInstance k;
  k.name = abi::kTopKKernel;
  k.source =
      translationUnit(k.name, "top-k sampling candidates of f32 logits rows", "elementwise.cuh", "",
                      1024, "TopKArgs", "llmc::dev::topKRows<1024>(args)");
  k.launch.block = {1024, 1, 1};
  return k;
}

KernelInstance argmaxKernel() {
  KernelInstance k;
  k.name = "llmc_argmax_f32";
  k.source = translationUnit(k.name, "argmax over f32 logits rows", "elementwise.cuh", "", 1024,
                             "ArgmaxArgs", "llmc::dev::argmaxRows<1024>(args)");
  k.launch.block = {1024, 1, 1};
  return k;
}

} // namespace llmc::cuda
