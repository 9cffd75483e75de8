// Each CUDA kernel family against the CPU backend (label gpu; skipped
// without a GPU): fresh random inputs, odd sizes, outputs poisoned with NaN
// beforehand, f32 and bf16 activations (bf16 compared by relative norm).
#include "cpu/attention.h"
#include "cpu/fused.h"
#include "cpu/kernels.h"
#include "cpu/layer_norm.h"
#include "cpu/matmul.h"
#include "cpu/matmul_q4.h"
#include "cpu/matmul_q8.h"
#include "cuda/attention_variants.h"
#include "cuda/cublaslt.h"
#include "cuda/gpu_test_util.h"
#include "common/step_params.h"
#include "cpu/backend/loaded_weights.h"
#include "cuda/ops/ops.h"
#include "kernels/common/q4_layout.h"
#include "kernels/common/q8_layout.h"
#include "kernels/common/rope.h"
#include "kernels/common/sampling.h"
#include "kv/kv_cache.h"
#include "ops/operands.h"
#include "ops/rope.h"
#include "sampling/sampler.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>

namespace llmc::test {
namespace {

const DType kActivations[] = {DType::F32, DType::BF16};

const char *name(DType t) { return t == DType::BF16 ? "bf16" : "f32"; }

// The fused forms of a Linear step (engine.fbs LinearParams) these tests run.
struct LinearForm {
  bool norm, gated;
  const char *name;
};
constexpr LinearForm kNormLinear{true, false, "norm"};
constexpr LinearForm kGatedLinear{false, true, "gated"};
constexpr LinearForm kNormGatedLinear{true, true, "norm,gated"};
constexpr LinearForm kPlainLinear{false, false, "plain"};

// CPU threads for a reference of `macs` multiply-adds: one for the small
// cases, the machine's cores for the 8B shapes.
int referenceThreads(int64_t macs) {
  return macs < (int64_t(1) << 26) ? 1 : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// cpu/ops/linear.cpp's output_scale s != 1 (Granite's residual_multiplier):
// out (+)= s * product, the product (bias included) rounded to f32 first.
std::vector<float> scaledOutput(const std::vector<float> &y0, const std::vector<float> &product,
                                float s, bool accumulate) {
  std::vector<float> out(product.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const float term = product[i] * s;
    out[i] = accumulate ? y0[i] + term : term;
  }
  return out;
}

// A Linear step's parameters with an output_scale.
fb::StepParamsUnion scaledLinearParams(const LinearFlags &flags, float outputScale) {
  fb::StepParamsUnion params = linearParams(flags);
  params.AsLinearParams()->output_scale = outputScale;
  return params;
}

TEST(GpuKernels, EmbeddingGathersRows) {
  LLMC_REQUIRE_GPU();
  for (DType act : kActivations) {
    const int64_t V = 37, H = 72, T = 5;
    MiniPlan p;
    int table = p.tensor(act, {V, H});
    int ids = p.buffer(DType::I32, 1), out = p.buffer(act, H);
    auto k = p.kernel(fb::OpKind::Embedding, {ids}, {out}, {table}, embeddingParams(), 0, false,
                      act);
    std::vector<float> tableValues = rounded(randomValues(V * H, 1), act);
    std::vector<int32_t> tokens = {0, 36, 5, 5, 17};
    auto dTable = toDevice(encode(tableValues, act));
    auto dIds = toDevice(tokens);
    auto dOut = poisoned(T * H, act);
    abi::StepArgs args{};
    args.in[0] = ptr(dIds);
    args.out = ptr(dOut);
    args.rows = T;
    launchStep(k, args, T, {ptr(dTable)});
    std::vector<float> got = fromDevice(dOut, T * H, act);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < H; ++h)
        ASSERT_EQ(got[t * H + h], tableValues[tokens[t] * H + h]) << name(act) << " " << t;
  }
}

// Launches a one-input step kernel on x with `weights` as its weight array
// and expects its [T, N] output close to `want` (relative norm).
void expectStepOutput(const cuda::KernelInstance &k, const cuda::DeviceBuffer &x,
                      const std::vector<const cuda::DeviceBuffer *> &weights,
                      const cuda::DeviceBuffer &out, int64_t T, int64_t N, DType act,
                      const std::vector<float> &want) {
  abi::StepArgs args{};
  args.in[0] = ptr(x);
  args.out = ptr(out);
  std::vector<const void *> table;
  for (const cuda::DeviceBuffer *w : weights)
    table.push_back(ptr(*w));
  args.rows = static_cast<int>(T);
  launchStep(k, args, T, table);
  EXPECT_LT(relativeError(fromDevice(out, T * N, act), want), tolerance(act))
      << k.name << " T=" << T;
}

TEST(GpuKernels, RmsNormMatchesCpu) {
  LLMC_REQUIRE_GPU();
  ThreadPool pool(1);
  for (DType act : kActivations) {
    const int64_t H = 200, T = 7;
    MiniPlan p;
    int gamma = p.tensor(DType::F32, {H});
    int in = p.buffer(act, H), out = p.buffer(act, H);
    auto k = p.kernel(fb::OpKind::Norm, {in}, {out}, {gamma}, normParams(1e-5), 0, false, act);
    std::vector<float> x = rounded(randomValues(T * H, 2), act);
    std::vector<float> g = randomValues(H, 3);
    std::vector<float> want(T * H);
    cpu::rmsNorm(pool, x.data(), T, {g.data(), DType::F32, H}, 1e-5f, want.data());
    auto dX = toDevice(encode(x, act));
    auto dG = toDevice(g);
    auto dOut = poisoned(T * H, act);
    expectStepOutput(k, dX, {&dG}, dOut, T, H, act, want);
  }
}

// Linear y (+)= s (x . W^T + bias) through the decode GEMV (maxTokens > 0) or
// the prefill GEMM (0), against cpu::matmul (s: the step's output_scale).
void checkLinear(DType act, int64_t N, int64_t K, int64_t T, int64_t maxTokens, bool bias,
                 bool accumulate, float outputScale = 1.0f) {
  ThreadPool pool(referenceThreads(N * K * T));
  MiniPlan p;
  int w = p.tensor(act, {N, K});
  std::vector<int> weights = {w};
  if (bias)
    weights.push_back(p.tensor(DType::F32, {N}));
  int in = p.buffer(act, K), out = p.buffer(act, N);
  auto k = p.kernel(fb::OpKind::Linear, {in}, {out}, weights,
                    scaledLinearParams({.bias = bias, .accumulate = accumulate}, outputScale),
                    maxTokens, maxTokens > 0, act);
  std::vector<float> x = rounded(randomValues(T * K, 4), act);
  std::vector<float> wv = rounded(randomValues(N * K, 5, 0.05f), act);
  std::vector<float> b = randomValues(N, 6);
  std::vector<float> y0 = rounded(randomValues(T * N, 7), act);
  std::vector<float> want = y0;
  if (outputScale == 1.0f) {
    cpu::matmul(pool, x.data(), T, {wv.data(), DType::F32, N, K}, bias ? b.data() : nullptr,
                accumulate ? 1.0f : 0.0f, want.data());
  } else {
    std::vector<float> product(T * N);
    cpu::matmul(pool, x.data(), T, {wv.data(), DType::F32, N, K}, bias ? b.data() : nullptr,
                0.0f, product.data());
    want = scaledOutput(y0, product, outputScale, accumulate);
  }
  auto dX = toDevice(encode(x, act));
  auto dW = toDevice(encode(wv, act));
  auto dB = toDevice(b);
  auto dOut = accumulate ? toDevice(encode(y0, act)) : poisoned(T * N, act);
  expectStepOutput(k, dX, {&dW, &dB}, dOut, T, N, act, want);
}

TEST(GpuKernels, DecodeGemvMatchesCpu) {
  LLMC_REQUIRE_GPU();
  for (DType act : kActivations) {
    checkLinear(act, 77, 136, 1, 1, false, false);
    checkLinear(act, 77, 136, 3, 4, true, true); // T below the bucket
    checkLinear(act, 130, 200, 16, 16, true, false);
    checkLinear(act, 24, 4096, 2, 2, false, true); // few rows: split-K
  }
}

TEST(GpuKernels, PrefillGemmMatchesCpu) {
  LLMC_REQUIRE_GPU();
  for (DType act : kActivations) {
    checkLinear(act, 130, 200, 70, 0, true, false); // bf16: tensor cores (K % 8 == 0)
    checkLinear(act, 67, 172, 129, 0, false, true); // bf16: FMA (K % 8 != 0)
    checkLinear(act, 300, 64, 1, 0, false, false);
  }
}

// --- cuBLASLt for plain bf16 Linear steps (runtime/cuda/cublaslt.h). ---

// cuBLASLt on the test's GPU: from the loader's path, else from the toolkit
// this test was built with. Made after the GpuContext, so destroyed before.
struct LtContext {
  std::unique_ptr<cuda::LtGemms> gemms;
  std::string why; // when gemms is null
};
LtContext &ltContext() {
  static LtContext context = [] {
    LtContext c;
    auto library = cuda::CublasLt::load();
#ifdef LLMC_TOOLKIT_LIBCUBLASLT
    if (!library && std::getenv("LLMC_LIBCUBLASLT") == nullptr) {
      setenv("LLMC_LIBCUBLASLT", LLMC_TOOLKIT_LIBCUBLASLT, 1);
      library = cuda::CublasLt::load();
    }
#endif
    if (!library) {
      c.why = library.message() + " (set LLMC_LIBCUBLASLT to the toolkit's libcublasLt.so)";
      return c;
    }
    auto gemms = cuda::LtGemms::create(**library, *GpuContext::get().device);
    if (gemms)
      c.gemms = std::move(*gemms);
    else
      c.why = gemms.message();
    return c;
  }();
  return context;
}

// Y[M, N] (+)= X[M, K] W[N, K]^T (+ bias) through cuBLASLt as the CUDA
// backend calls it for a plain bf16 Linear step (engine.fbs, LibraryGemm),
// against cpu::matmul. `xOffset` bytes move X off its allocation's 256-byte
// alignment, as arena offsets may. False when cuBLASLt has no algorithm for
// the shape (the backend then launches the step's own kernel).
bool checkCublasLtLinear(int64_t M, int64_t N, int64_t K, bool bias, bool accumulate,
                         int64_t xOffset = 0, float alpha = 1.0f) {
  cuda::LtGemms *gemms = ltContext().gemms.get();
  EXPECT_NE(gemms, nullptr) << "cuBLASLt does not load: " << ltContext().why;
  if (gemms == nullptr)
    return false;
  ThreadPool pool(1);
  const DType bf16 = DType::BF16;
  std::vector<float> x = rounded(randomValues(M * K, 11), bf16);
  std::vector<float> w = rounded(randomValues(N * K, 12, 0.05f), bf16);
  std::vector<float> b = randomValues(N, 13);
  std::vector<float> y0 = rounded(randomValues(M * N, 14), bf16);
  std::vector<float> want = y0;
  if (alpha == 1.0f) {
    cpu::matmul(pool, x.data(), M, {w.data(), DType::F32, N, K}, bias ? b.data() : nullptr,
                accumulate ? 1.0f : 0.0f, want.data());
  } else { // an output_scale: the plan gives cuBLASLt no bias then
    std::vector<float> product(M * N);
    cpu::matmul(pool, x.data(), M, {w.data(), DType::F32, N, K}, nullptr, 0.0f, product.data());
    want = scaledOutput(y0, product, alpha, accumulate);
  }
  std::vector<uint8_t> xBytes(static_cast<size_t>(xOffset), 0), encoded = encode(x, bf16);
  xBytes.insert(xBytes.end(), encoded.begin(), encoded.end());
  auto dX = toDevice(xBytes);
  auto dW = toDevice(encode(w, bf16));
  auto dB = toDevice(b);
  auto dY = accumulate ? toDevice(encode(y0, bf16)) : poisoned(M * N, bf16);
  cuda::LtGemmCall call;
  call.m = M;
  call.n = N;
  call.k = K;
  call.lda = K;
  call.ldb = K;
  call.ldc = N;
  call.alpha = alpha;
  call.beta = accumulate ? 1.0f : 0.0f;
  call.w = dW.get();
  call.x = dX.get() + static_cast<uint64_t>(xOffset);
  call.y = dY.get();
  call.bias = bias ? dB.get() : 0;
  // Twice without a residual (the second from the descriptor cache): the same result.
  for (int repeat = 0; repeat < (accumulate ? 1 : 2); ++repeat) {
    auto ran = gemms->run(call);
    EXPECT_TRUE(ran.isOk()) << ran.message();
    if (!ran.isOk() || !*ran)
      return false;
  }
  Status done = GpuContext::get().device->synchronize();
  EXPECT_TRUE(done.isOk()) << done.message();
  std::vector<float> got = fromDevice(dY, M * N, bf16);
  EXPECT_LT(relativeError(got, want), tolerance(bf16))
      << "cuBLASLt M=" << M << " N=" << N << " K=" << K << (bias ? " bias" : "")
      << (accumulate ? " residual" : "") << " x offset " << xOffset << " alpha " << alpha;
  return true;
}

TEST(GpuKernels, CublasLtLinearMatchesCpu) {
  LLMC_REQUIRE_GPU();
  // Shapes cuBLASLt must take (K, N multiples of 8; 256-byte aligned buffers).
  EXPECT_TRUE(checkCublasLtLinear(70, 136, 200, false, false));
  EXPECT_TRUE(checkCublasLtLinear(129, 64, 256, false, true)); // residual: beta 1
  EXPECT_TRUE(checkCublasLtLinear(1, 64, 64, false, false));
  EXPECT_TRUE(checkCublasLtLinear(131, 512, 1024, false, true));
  // An output_scale as alpha (Granite's residual_multiplier), with and without the residual.
  EXPECT_TRUE(checkCublasLtLinear(129, 64, 256, false, true, 0, 0.5f));
  EXPECT_TRUE(checkCublasLtLinear(70, 136, 200, false, false, 0, 0.22f));
  // Odd sizes, an X off its alignment, the bias epilogue (f32 bias, bf16
  // output): where cuBLASLt has no algorithm the backend launches the step's
  // kernel, so either outcome is allowed, but a result must be right.
  struct Odd {
    int64_t m, n, k;
    bool bias, accumulate;
    int64_t xOffset;
  } odd[] = {{5, 77, 172, false, false, 0},
             {67, 130, 200, false, true, 0},
             {17, 96, 128, false, true, 2},
             {33, 300, 64, true, true, 0},
             {9, 64, 64, true, false, 0}};
  for (const Odd &o : odd) {
    bool ran = checkCublasLtLinear(o.m, o.n, o.k, o.bias, o.accumulate, o.xOffset);
    std::printf("cuBLASLt M=%lld N=%lld K=%lld%s%s x offset %lld: %s\n",
                static_cast<long long>(o.m), static_cast<long long>(o.n),
                static_cast<long long>(o.k), o.bias ? " bias" : "", o.accumulate ? " residual" : "",
                static_cast<long long>(o.xOffset),
                ran ? "ran on cuBLASLt" : "no algorithm (the step's kernel runs it)");
  }
}

TEST(GpuKernels, LogitsGatherRequestedRows) {
  LLMC_REQUIRE_GPU();
  ThreadPool pool(1);
  for (DType act : kActivations)
    for (int64_t maxTokens : {4, 0}) {
      const int64_t V = 301, H = 64, T = 9;
      std::vector<int32_t> rows = {8, 0, 3};
      MiniPlan p;
      int w = p.tensor(act, {V, H});
      int in = p.buffer(act, H), out = p.buffer(DType::F32, V);
      auto k =
          p.kernel(fb::OpKind::Logits, {in}, {out}, {w}, logitsParams(), maxTokens, maxTokens > 0,
                   act);
      std::vector<float> x = rounded(randomValues(T * H, 8), act);
      std::vector<float> wv = rounded(randomValues(V * H, 9, 0.1f), act);
      std::vector<float> gathered;
      for (int32_t r : rows)
        gathered.insert(gathered.end(), x.begin() + r * H, x.begin() + (r + 1) * H);
      std::vector<float> want(rows.size() * V);
      cpu::matmul(pool, gathered.data(), static_cast<int64_t>(rows.size()),
                  {wv.data(), DType::F32, V, H}, nullptr, 0.0f, want.data());
      auto dX = toDevice(encode(x, act));
      auto dW = toDevice(encode(wv, act));
      auto dRows = toDevice(rows);
      auto dOut = poisoned(T * V, DType::F32);
      abi::StepArgs args{};
      args.in[0] = ptr(dX);
      args.out = ptr(dOut);
      args.rows = T;
      args.logitRows = static_cast<const int *>(ptr(dRows));
      args.numLogitRows = static_cast<int>(rows.size());
      launchStep(k, args, static_cast<int64_t>(rows.size()), {ptr(dW)});
      std::vector<float> got = fromDevice(dOut, rows.size() * V, DType::F32);
      EXPECT_LT(relativeError(got, want), act == DType::F32 ? 2e-5 : 1e-2) << k.name;
    }
}

TEST(GpuKernels, RopeMatchesTheSharedMath) {
  LLMC_REQUIRE_GPU();
  for (DType act : kActivations) {
    const int64_t heads = 3, D = 10, T = 4;
    MiniPlan p;
    int buf = p.buffer(act, heads * D);
    auto k = p.kernel(fb::OpKind::Rope, {buf}, {buf}, {}, ropeParams(heads, D), 0, false, act);
    std::vector<float> x = rounded(randomValues(T * heads * D, 10), act);
    std::vector<int32_t> positions = {0, 1, 77, 299};
    std::vector<float> want = x;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < heads; ++h)
        for (int i = 0; i < D / 2; ++i) {
          float inv = hd::ropeInvFreq(i, static_cast<int>(D), 10000.0f, hd::RopeScaling{});
          float angle = hd::ropeAngle(positions[t], inv);
          float *head = &want[(t * heads + h) * D];
          hd::ropeRotate(head[i], head[i + D / 2], hd::cosF(angle), hd::sinF(angle));
        }
    auto dX = toDevice(encode(x, act));
    auto dPos = toDevice(positions);
    abi::StepArgs args{};
    args.in[0] = args.out = ptr(dX);
    args.positions = static_cast<const int *>(ptr(dPos));
    args.rows = T;
    launchStep(k, args, T);
    EXPECT_LT(relativeError(fromDevice(dX, x.size(), act), want), tolerance(act)) << k.name;
  }
}

// --- RoPE variants (kernels/rope.cuh specs): partial rotary, interleaved
// pairs, yarn's attention factor, longrope's two tables, dynamic NTK past
// its original length (frequencies from each sequence's forward pass). ---
struct RopeCase {
  const char *name;
  int rotaryDim; // of heads of D
  bool interleaved;
  fb::RopeScalingKind kind;
};
const RopeCase kRopeCases[] = {
    {"partial", 16, false, fb::RopeScalingKind::None},
    {"interleaved", 0, true, fb::RopeScalingKind::None},
    {"partial-interleaved", 8, true, fb::RopeScalingKind::None},
    {"yarn", 0, false, fb::RopeScalingKind::Yarn},
    {"longrope", 0, false, fb::RopeScalingKind::LongRope},
    {"dynamic", 0, false, fb::RopeScalingKind::Dynamic},
};

// The case's RopeParams for heads of D (rotaryDim 0: all of D); the scaled
// kinds' original length is 64, so the test's longer sequences pass it.
std::unique_ptr<fb::RopeParamsT> ropeParamsOf(const RopeCase &c, int64_t D) {
  auto r = test::ropeOf(D);
  r->rotary_dim = c.rotaryDim > 0 ? c.rotaryDim : D;
  r->interleaved = c.interleaved;
  if (c.kind == fb::RopeScalingKind::None)
    return r;
  auto s = std::make_unique<fb::RopeScalingT>();
  s->kind = c.kind;
  s->factor = c.kind == fb::RopeScalingKind::Dynamic ? 2.0 : 4.0;
  s->original_max_positions = 64;
  if (c.kind == fb::RopeScalingKind::Yarn)
    s->attention_factor = 1.25;
  if (c.kind == fb::RopeScalingKind::LongRope) {
    s->attention_factor = 1.1;
    for (int64_t i = 0; i < r->rotary_dim / 2; ++i) {
      s->short_factor.push_back(1.0f + 0.05f * static_cast<float>(i));
      s->long_factor.push_back(2.0f + 0.5f * static_cast<float>(i));
    }
  }
  r->scaling = std::move(s);
  return r;
}

// Row t's cos/sin [rotaryDim] (halves) in the forward pass of its sequence,
// as CpuExecutor::buildRunTables computes them: seqLen = the sequence's
// largest position + 1.
std::vector<float> perPassRopeTable(const ops::RopeConfig &c, const std::vector<int32_t> &positions,
                                    const std::vector<int32_t> &seqFirst,
                                    const std::vector<int32_t> &seqRows) {
  const hd::RopeScaling scaling = c.kernelScaling();
  const int half = c.rotaryDim / 2;
  std::vector<float> table(positions.size() * c.rotaryDim);
  for (size_t s = 0; s < seqFirst.size(); ++s) {
    int32_t last = 0;
    for (int32_t r = seqFirst[s]; r < seqFirst[s] + seqRows[s]; ++r)
      last = std::max(last, positions[r]);
    for (int32_t r = seqFirst[s]; r < seqFirst[s] + seqRows[s]; ++r)
      for (int i = 0; i < half; ++i)
        hd::ropeCosSin(positions[r], hd::ropeInvFreqAt(i, c.rotaryDim, c.theta, scaling, last + 1),
                       scaling.attentionFactor, table[r * c.rotaryDim + i],
                       table[r * c.rotaryDim + half + i]);
  }
  return table;
}

// --- The Norm forms beyond whole-row RMSNorm, against the CPU kernels. ---

fb::StepParamsUnion normOf(fb::NormKind kind, bool bias, int64_t group, double offset = 0.0) {
  fb::NormParamsT n = test::rms(1e-5, offset);
  n.kind = kind;
  n.bias = bias;
  n.group_width = group;
  return test::params(std::move(n));
}

// LayerNorm: whole rows with and without bias (StableLM, Phi / Cohere),
// per-feature groups (Cohere's q/k norm), shared group weights with bias
// (Phi's qk_layernorm); f32 and bf16 weights; odd widths.
TEST(GpuKernels, LayerNormMatchesCpu) {
  LLMC_REQUIRE_GPU();
  ThreadPool pool(1);
  struct Form {
    int64_t width, group, weights; // weights: gamma/beta entries (width or group)
    bool bias;
    DType weight;
    double offset;
  } forms[] = {{200, 200, 200, true, DType::F32, 0.0},  {200, 200, 200, false, DType::BF16, 0.0},
               {96, 32, 96, false, DType::F32, 0.0},    {96, 32, 32, true, DType::F32, 0.0},
               {2560, 2560, 2560, true, DType::BF16, 0.0}, {64, 16, 16, false, DType::F32, 1.0}};
  for (DType act : kActivations)
    for (const Form &f : forms) {
      const int64_t T = 7;
      MiniPlan p;
      int gamma = p.tensor(f.weight, {f.weights});
      std::vector<int> weights = {gamma};
      if (f.bias)
        weights.push_back(p.tensor(f.weight, {f.weights}));
      int in = p.buffer(act, f.width), out = p.buffer(act, f.width);
      auto k = p.kernel(fb::OpKind::Norm, {in}, {out}, weights,
                        normOf(fb::NormKind::Layer, f.bias, f.group == f.width ? 0 : f.group,
                               f.offset),
                        0, false, act);
      // A large mean: the centered sums must not lose the variance.
      std::vector<float> x = randomValues(T * f.width, 21);
      for (float &v : x)
        v += 30.0f;
      x = rounded(x, act);
      std::vector<float> g = rounded(randomValues(f.weights, 22), f.weight);
      std::vector<float> b = rounded(randomValues(f.weights, 23), f.weight);
      std::vector<float> want(T * f.width);
      cpu::layerNorm(pool, x.data(), T, {f.width, f.group}, {g.data(), DType::F32, f.weights},
                     f.bias ? cpu::WeightVector{b.data(), DType::F32, f.weights}
                            : cpu::WeightVector{},
                     1e-5f, want.data(), static_cast<float>(f.offset));
      auto dX = toDevice(encode(x, act));
      auto dG = toDevice(encode(g, f.weight));
      auto dB = toDevice(encode(b, f.weight));
      auto dOut = poisoned(T * f.width, act);
      expectStepOutput(k, dX, {&dG, &dB}, dOut, T, f.width, act, want);
    }
}

// Per-head RMSNorm (Qwen3's q/k norm): gamma [G] shared by the row's W / G groups.
TEST(GpuKernels, GroupedRmsNormMatchesCpu) {
  LLMC_REQUIRE_GPU();
  ThreadPool pool(1);
  for (DType act : kActivations)
    for (int64_t group : {32, 128, 80}) {
      const int64_t W = group * 5, T = 6;
      MiniPlan p;
      int gamma = p.tensor(DType::F32, {group});
      int in = p.buffer(act, W), out = p.buffer(act, W);
      auto k = p.kernel(fb::OpKind::Norm, {in}, {out}, {gamma},
                        normOf(fb::NormKind::Rms, false, group), 0, false, act);
      std::vector<float> x = rounded(randomValues(T * W, 24), act);
      std::vector<float> g = randomValues(group, 25);
      std::vector<float> want(T * W);
      cpu::rmsNorm(pool, x.data(), T * (W / group), {g.data(), DType::F32, group}, 1e-5f,
                   want.data());
      auto dX = toDevice(encode(x, act));
      auto dG = toDevice(g);
      auto dOut = poisoned(T * W, act);
      expectStepOutput(k, dX, {&dG}, dOut, T, W, act, want);
    }
}

// A Rope step of each variant against cpu::rope with the per-pass tables:
// two sequences, one of them past the scaled kinds' original length (64).
TEST(GpuKernels, RopeStepVariantsMatchCpu) {
  LLMC_REQUIRE_GPU();
  ThreadPool pool(1);
  for (DType act : kActivations)
    for (const RopeCase &c : kRopeCases) {
      const int64_t heads = 3, D = 32;
      const std::vector<int32_t> positions = {0, 1, 2, 90, 91}, seqFirst = {0, 3},
                                 seqRows = {3, 2}, rowSequence = {0, 0, 0, 1, 1};
      const int64_t T = static_cast<int64_t>(positions.size());
      MiniPlan p;
      int buf = p.buffer(act, heads * D);
      std::unique_ptr<fb::RopeParamsT> rope = ropeParamsOf(c, D);
      const ops::RopeConfig config = ops::ropeConfig(*rope);
      fb::StepParamsUnion params = ropeParams(heads, D);
      params.AsRopeStepParams()->rope = std::move(rope);
      auto k = p.kernel(fb::OpKind::Rope, {buf}, {buf}, {}, std::move(params), 0, false, act);
      std::vector<float> x = rounded(randomValues(T * heads * D, 26), act);
      std::vector<float> want = x;
      std::vector<float> table = perPassRopeTable(config, positions, seqFirst, seqRows);
      std::vector<int32_t> rowIndex(T);
      std::iota(rowIndex.begin(), rowIndex.end(), 0);
      cpu::rope(pool, want.data(), T, heads * D,
                {heads, D, config.rotaryDim, config.interleaved}, rowIndex.data(), table.data());
      auto dX = toDevice(encode(x, act));
      auto dPos = toDevice(positions);
      auto dRowSeq = toDevice(rowSequence);
      auto dFirst = toDevice(seqFirst);
      auto dRows = toDevice(seqRows);
      abi::StepArgs args{};
      args.in[0] = args.out = ptr(dX);
      args.positions = static_cast<const int *>(ptr(dPos));
      args.rowSequence = static_cast<const int *>(ptr(dRowSeq));
      args.seqFirstRow = static_cast<const int *>(ptr(dFirst));
      args.seqNumRows = static_cast<const int *>(ptr(dRows));
      args.numSequences = 2;
      args.rows = static_cast<int>(T);
      launchStep(k, args, T);
      EXPECT_LT(relativeError(fromDevice(dX, x.size(), act), want), tolerance(act))
          << c.name << " " << k.name;
    }
}

// Logits with a bias (Phi) and a scale (Cohere), with and without a
// softcap: softcap((x . W^T + bias) * scale), decode GEMV and prefill GEMM.
TEST(GpuKernels, LogitsScaleAndBiasMatchCpu) {
  LLMC_REQUIRE_GPU();
  ThreadPool pool(1);
  for (DType act : kActivations)
    for (int64_t maxTokens : {4, 0})
      for (double softcap : {0.0, 3.0}) {
        const int64_t V = 301, H = 64, T = 3;
        MiniPlan p;
        int w = p.tensor(act, {V, H}), b = p.tensor(DType::F32, {V});
        int in = p.buffer(act, H), out = p.buffer(DType::F32, V);
        fb::StepParamsUnion params = logitsParams(false, softcap);
        params.AsLogitsParams()->scale = 0.5;
        params.AsLogitsParams()->bias = true;
        auto k = p.kernel(fb::OpKind::Logits, {in}, {out}, {w, b}, std::move(params), maxTokens,
                          maxTokens > 0, act);
        std::vector<float> x = rounded(randomValues(T * H, 27), act);
        std::vector<float> wv = rounded(randomValues(V * H, 28, 0.1f), act);
        std::vector<float> bv = randomValues(V, 29);
        std::vector<float> want(T * V);
        cpu::matmul(pool, x.data(), T, {wv.data(), DType::F32, V, H}, bv.data(), 0.0f,
                    want.data());
        for (float &y : want)
          y = hd::softCap(y * 0.5f, static_cast<float>(softcap));
        std::vector<int32_t> rows = {0, 1, 2};
        auto dX = toDevice(encode(x, act));
        auto dW = toDevice(encode(wv, act));
        auto dB = toDevice(bv);
        auto dRows = toDevice(rows);
        auto dOut = poisoned(T * V, DType::F32);
        abi::StepArgs args{};
        args.in[0] = ptr(dX);
        args.out = ptr(dOut);
        args.rows = T;
        args.logitRows = static_cast<const int *>(ptr(dRows));
        args.numLogitRows = static_cast<int>(T);
        launchStep(k, args, T, {ptr(dW), ptr(dB)});
        EXPECT_LT(relativeError(fromDevice(dOut, T * V, DType::F32), want),
                  act == DType::F32 ? 2e-5 : 1e-2)
            << k.name;
      }
}

// Relu and the gated GELU / Relu Activation steps (GeGLU, ReGLU).
TEST(GpuKernels, ReluAndGatedActivationsMatchCpu) {
  LLMC_REQUIRE_GPU();
  ThreadPool pool(1);
  struct Op {
    fb::ActivationKind kind;
    bool gated;
  } cases[] = {{fb::ActivationKind::Relu, false},
             {fb::ActivationKind::GeluTanh, true},
             {fb::ActivationKind::GeluErf, true},
             {fb::ActivationKind::Relu, true}};
  for (DType act : kActivations)
    for (const Op &op : cases) {
      const int64_t W = 333, T = 3;
      MiniPlan p;
      int a = p.buffer(act, W), b = p.buffer(act, W), out = p.buffer(act, W);
      auto k = p.kernel(fb::OpKind::Activation, op.gated ? std::vector<int>{a, b} : std::vector<int>{a},
                        {out}, {}, activationParams(op.kind, op.gated), 0, false, act);
      std::vector<float> x = rounded(randomValues(T * W, 30), act);
      std::vector<float> y = rounded(randomValues(T * W, 31), act);
      std::vector<float> want(T * W);
      if (op.gated)
        cpu::swiglu(pool, x.data(), y.data(), want.data(), T * W, ops::gateKind(op.kind));
      else
        for (int64_t i = 0; i < T * W; ++i)
          want[i] = hd::relu(x[i]);
      auto dA = toDevice(encode(x, act));
      auto dB = toDevice(encode(y, act));
      auto dOut = poisoned(T * W, act);
      abi::StepArgs args{};
      args.in[0] = ptr(dA);
      args.in[1] = ptr(dB);
      args.out = ptr(dOut);
      args.rows = T;
      launchStep(k, args, T);
      EXPECT_LT(relativeError(fromDevice(dOut, T * W, act), want), tolerance(act)) << k.name;
    }
}

TEST(GpuKernels, PointwiseOpsMatchCpu) {
  LLMC_REQUIRE_GPU();
  ThreadPool pool(1);
  for (DType act : kActivations)
    for (const char *op : {"add", "mul", "silu", "swiglu"}) {
      const int64_t W = 333, T = 3; // W odd: one element per access
      const std::string name = op;
      bool binary = name != "silu";
      MiniPlan p;
      int a = p.buffer(act, W), b = p.buffer(act, W), out = p.buffer(act, W);
      std::vector<int> inputs = binary ? std::vector<int>{a, b} : std::vector<int>{a};
      const bool elementwise = name == "add" || name == "mul";
      auto k = p.kernel(elementwise ? fb::OpKind::Elementwise : fb::OpKind::Activation, inputs,
                        {out}, {},
                        elementwise ? elementwiseParams(name == "add" ? fb::ElementwiseOp::Add
                                                                      : fb::ElementwiseOp::Mul)
                                    : activationParams(fb::ActivationKind::Silu, binary),
                        0, false, act);
      std::vector<float> x = rounded(randomValues(T * W, 11), act);
      std::vector<float> y = rounded(randomValues(T * W, 12), act);
      std::vector<float> want(T * W);
      if (name == "add")
        cpu::add(pool, x.data(), y.data(), want.data(), T * W);
      else if (name == "mul")
        cpu::mul(pool, x.data(), y.data(), want.data(), T * W);
      else if (name == "silu")
        cpu::silu(pool, x.data(), want.data(), T * W);
      else
        cpu::swiglu(pool, x.data(), y.data(), want.data(), T * W);
      auto dA = toDevice(encode(x, act));
      auto dB = toDevice(encode(y, act));
      auto dOut = poisoned(T * W, act);
      abi::StepArgs args{};
      args.in[0] = ptr(dA);
      args.in[1] = ptr(dB);
      args.out = ptr(dOut);
      args.rows = T;
      launchStep(k, args, T);
      EXPECT_LT(relativeError(fromDevice(dOut, T * W, act), want), tolerance(act)) << k.name;
    }
}

// Paged attention of a batch of three sequences with cached history, random
// block tables and NaN in every unused cache slot, against
// cpu::pagedAttention; checks the outputs and the cache slots written.
// packed: q, k, v are column ranges of one qkv buffer and RopeAttention
// rotates them on the fly (the CPU with its RoPE table).
// An attention shape: heads, KV heads, head dim, max_seq_len, cache blocks,
// and per sequence its cached positions and (prefill) new rows.
struct AttentionShape {
  int64_t heads, kvHeads, D, maxSeq, numBlocks;
  std::vector<int64_t> past, prefillRows;
};

// Small: max_seq 300 gives room for 10 splits of 32 positions or more
// (hd::decodeSplits): contexts 1, 38 and 281 use 1, 2 and 9 of them.
const AttentionShape kSmallAttention{8, 2, 64, 300, 64, {0, 37, 280}, {5, 20, 1}};
// Llama-3-8B: 32 heads / 8 KV heads of 128, max_seq 8192: 32 splits, mostly
// empty at contexts 1 and 38 (1 and 2 working), all working at 4096; prefill
// tiles of 8 rows spanning sequences (rows 0..4 | 5..24 | 25..27).
const AttentionShape kLlama8bAttention{32, 8, 128, 8192, 300, {0, 37, 300, 4095}, {5, 20, 3, 1}};

// Plain attention of row t of the batch, head by head, from the CPU's cache
// after the step (every position written): softcap, then the window mask
// (p - window < j <= p), in double. q rows are rotated with `ropeTable` when
// it is not null.
std::vector<float> naiveAttention(const cpu::AttentionBatch &b, const kv::KvLayerView &cache,
                                  int64_t T, const std::vector<int32_t> &rowSequence) {
  const int64_t D = cache.headDim, group = b.heads / cache.kvHeads, bs = cache.blockSize;
  std::vector<float> out(T * b.heads * D);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = b.positions[t];
    const int32_t *table = b.sequences[rowSequence[t]].blockTable;
    for (int64_t h = 0; h < b.heads; ++h) {
      std::vector<double> q(b.q + t * b.ldq + h * D, b.q + t * b.ldq + (h + 1) * D);
      if (b.ropeTable != nullptr)
        for (int64_t i = 0; i < D / 2; ++i) {
          const double c = b.ropeTable[pos * D + i], s = b.ropeTable[pos * D + D / 2 + i];
          const double x0 = q[i], x1 = q[i + D / 2];
          q[i] = x0 * c - x1 * s;
          q[i + D / 2] = x0 * s + x1 * c;
        }
      auto slot = [&](int64_t j) {
        return (table[j / bs] * bs + j % bs) * cache.kvHeads * D + (h / group) * D;
      };
      const int64_t first = b.scores.window > 0 ? std::max<int64_t>(0, pos - b.scores.window + 1) : 0;
      std::vector<double> w(pos + 1, 0.0);
      double maxScore = -INFINITY, z = 0.0;
      for (int64_t j = first; j <= pos; ++j) {
        double dot = 0.0;
        for (int64_t i = 0; i < D; ++i)
          dot += q[i] * cache.keys[slot(j) + i];
        w[j] = b.scale * dot;
        if (b.scores.softcap > 0)
          w[j] = b.scores.softcap * std::tanh(w[j] / b.scores.softcap);
        maxScore = std::max(maxScore, w[j]);
      }
      for (int64_t j = first; j <= pos; ++j)
        z += (w[j] = std::exp(w[j] - maxScore));
      for (int64_t i = 0; i < D; ++i) {
        double acc = 0.0;
        for (int64_t j = first; j <= pos; ++j)
          acc += w[j] / z * cache.values[slot(j) + i];
        out[(t * b.heads + h) * D + i] = static_cast<float>(acc);
      }
    }
  }
  return out;
}

// scores: a sliding window and softcap baked into the kernel; the device
// cache then holds NaN before each sequence's window (released blocks), and
// the GPU is also checked against naiveAttention.
void checkAttention(DType act, bool decode, bool packed = false,
                    const AttentionShape &dims = kSmallAttention,
                    hd::AttentionScores scores = {}, const RopeCase *ropeCase = nullptr) {
  ThreadPool pool(4);
  const int64_t heads = dims.heads, kvHeads = dims.kvHeads, D = dims.D, bs = 16,
                numBlocks = dims.numBlocks, maxSeq = dims.maxSeq;
  const std::vector<int64_t> &past = dims.past;
  const std::vector<int64_t> fresh =
      decode ? std::vector<int64_t>(past.size(), 1) : dims.prefillRows;
  MiniPlan p;
  p.plan.model->max_seq_len = maxSeq;
  const int64_t qkvWidth = (heads + 2 * kvHeads) * D;
  const double scale = 1.0 / std::sqrt(double(D));
  cuda::KernelInstance kernel;
  ASSERT_EQ(past.size(), fresh.size());
  std::unique_ptr<fb::RopeParamsT> ropeParams = ropeCase ? ropeParamsOf(*ropeCase, D) : nullptr;
  const ops::RopeConfig ropeConfig =
      ropeParams ? ops::ropeConfig(*ropeParams) : ops::RopeConfig{};
  if (packed) {
    int qkv = p.buffer(act, qkvWidth), out = p.buffer(act, heads * D);
    fb::StepParamsUnion params =
        attentionParams({.heads = heads, .kvHeads = kvHeads, .headDim = D, .qColumn = 0,
                         .kColumn = heads * D, .vColumn = (heads + kvHeads) * D, .rope = true,
                         .scale = scale});
    if (ropeParams)
      params.AsAttentionParams()->rope = std::make_unique<fb::RopeParamsT>(*ropeParams);
    kernel = p.kernel(fb::OpKind::Attention, {qkv, qkv, qkv}, {out}, {}, std::move(params),
                      decode ? 4 : 0, decode, act);
  } else {
    int q = p.buffer(act, heads * D), k = p.buffer(act, kvHeads * D);
    int v = p.buffer(act, kvHeads * D), out = p.buffer(act, heads * D);
    kernel = p.kernel(fb::OpKind::Attention, {q, k, v}, {out}, {},
                      attentionParams({.heads = heads, .kvHeads = kvHeads, .headDim = D,
                                       .scale = scale}),
                      decode ? 4 : 0, decode, act);
  }
  if (scores.window > 0 || scores.softcap > 0.0f)
    kernel = test::withAttentionScores(kernel, scores.window, scores.softcap);
  // Rows, positions, sequences and shuffled block tables.
  std::vector<int32_t> positions, rowSequence, seqFirst, seqRows;
  std::vector<cpu::AttentionSequence> sequences;
  std::vector<int32_t> blockIds(numBlocks - 1);
  std::iota(blockIds.begin(), blockIds.end(), 1);
  std::shuffle(blockIds.begin(), blockIds.end(), std::mt19937(13));
  const int64_t stride = (maxSeq + bs - 1) / bs;
  std::vector<int32_t> tables(past.size() * stride, 0);
  size_t nextBlock = 0;
  for (size_t s = 0; s < past.size(); ++s) {
    seqFirst.push_back(static_cast<int32_t>(positions.size()));
    seqRows.push_back(static_cast<int32_t>(fresh[s]));
    for (int64_t r = 0; r < fresh[s]; ++r) {
      positions.push_back(static_cast<int32_t>(past[s] + r));
      rowSequence.push_back(static_cast<int32_t>(s));
    }
    for (int64_t b = 0; b <= (past[s] + fresh[s] - 1) / bs; ++b)
      tables[s * stride + b] = blockIds[nextBlock++];
  }
  const int64_t T = static_cast<int64_t>(positions.size());
  for (size_t s = 0; s < past.size(); ++s)
    sequences.push_back({seqFirst[s], seqRows[s], &tables[s * stride]});
  // The caches: NaN everywhere, history at the sequences' past positions.
  kv::KvCacheShape shape{1, static_cast<int32_t>(numBlocks), static_cast<int32_t>(bs),
                         static_cast<int32_t>(kvHeads), static_cast<int32_t>(D)};
  auto cache = kv::KvCache::create(shape);
  ASSERT_TRUE(cache.isOk()) << cache.message();
  kv::KvLayerView layer = cache->layer(0);
  const int64_t slotFloats = kvHeads * D, cacheFloats = numBlocks * bs * slotFloats;
  std::fill(layer.keys, layer.keys + cacheFloats, std::nanf(""));
  std::fill(layer.values, layer.values + cacheFloats, std::nanf(""));
  std::vector<float> history = rounded(randomValues(2 * cacheFloats, 14, 0.5f), act);
  for (size_t s = 0; s < past.size(); ++s)
    for (int64_t pos = 0; pos < past[s]; ++pos) {
      int64_t slot = (tables[s * stride + pos / bs] * bs + pos % bs) * slotFloats;
      std::copy(&history[slot], &history[slot] + slotFloats, layer.keys + slot);
      std::copy(&history[cacheFloats + slot], &history[cacheFloats + slot] + slotFloats,
                layer.values + slot);
    }
  std::vector<float> initialKeys(layer.keys, layer.keys + cacheFloats);
  std::vector<float> initialValues(layer.values, layer.values + cacheFloats);
  for (size_t s = 0; s < past.size(); ++s) // what no row of the step may read
    for (int64_t pos = 0; pos < hd::windowStart(static_cast<int>(past[s]), scores.window); ++pos) {
      int64_t slot = (tables[s * stride + pos / bs] * bs + pos % bs) * slotFloats;
      std::fill(&initialKeys[slot], &initialKeys[slot] + slotFloats, std::nanf(""));
      std::fill(&initialValues[slot], &initialValues[slot] + slotFloats, std::nanf(""));
    }
  std::vector<float> qv = rounded(randomValues(T * heads * D, 15), act);
  std::vector<float> kv = rounded(randomValues(T * kvHeads * D, 16), act);
  std::vector<float> vv = rounded(randomValues(T * kvHeads * D, 17), act);
  std::vector<float> qkv = rounded(randomValues(T * qkvWidth, 18), act);
  std::vector<float> want(T * heads * D, 0.0f);
  std::vector<float> invFreq(D / 2);
  cpu::ropeInvFreqs(static_cast<int>(D), 10000.0f, hd::RopeScaling{}, invFreq.data());
  std::vector<float> table = cpu::ropeTable(maxSeq, static_cast<int>(D), invFreq.data());
  cpu::AttentionBatch batch{};
  batch.q = packed ? qkv.data() : qv.data();
  batch.ldq = packed ? qkvWidth : heads * D;
  batch.k = packed ? qkv.data() + heads * D : kv.data();
  batch.ldk = packed ? qkvWidth : kvHeads * D;
  batch.v = packed ? qkv.data() + (heads + kvHeads) * D : vv.data();
  batch.ldv = packed ? qkvWidth : kvHeads * D;
  batch.ropeTable = packed ? table.data() : nullptr;
  std::vector<float> passTable;
  std::vector<int32_t> rowIndex(T);
  std::iota(rowIndex.begin(), rowIndex.end(), 0);
  if (packed && ropeParams) { // the CPU's per-row tables, as for dynamic/longrope plans
    passTable = perPassRopeTable(ropeConfig, positions, seqFirst, seqRows);
    batch.ropeTable = passTable.data();
    batch.ropeRows = rowIndex.data();
    batch.ropeRotaryDim = ropeConfig.rotaryDim;
    batch.ropeInterleaved = ropeConfig.interleaved;
  }
  batch.out = want.data();
  batch.ldo = heads * D;
  batch.positions = positions.data();
  batch.sequences = sequences.data();
  batch.numSequences = static_cast<int64_t>(sequences.size());
  batch.heads = heads;
  batch.scale = static_cast<float>(scale);
  batch.scores = scores;
  cpu::pagedAttention(pool, batch, layer);
  std::vector<float> naive;
  if (scores.window > 0 || scores.softcap > 0.0f) {
    naive = naiveAttention(batch, layer, T, rowSequence);
    EXPECT_LT(relativeError(want, naive), 1e-5) << "CPU vs naive, " << kernel.name;
  }

  auto dQ = toDevice(encode(packed ? qkv : qv, act));
  auto dK = packed ? toDevice(encode(qkv, act)) : toDevice(encode(kv, act));
  auto dV = packed ? toDevice(encode(qkv, act)) : toDevice(encode(vv, act));
  auto dOut = poisoned(T * heads * D, act);
  auto dKeys = toDevice(encode(initialKeys, act));
  auto dValues = toDevice(encode(initialValues, act));
  auto dPos = toDevice(positions);
  auto dRowSeq = toDevice(rowSequence);
  auto dFirst = toDevice(seqFirst);
  auto dRows = toDevice(seqRows);
  auto dTables = toDevice(tables);
  abi::StepArgs args{};
  args.in[0] = ptr(dQ);
  args.in[1] = ptr(dK);
  args.in[2] = ptr(dV);
  args.out = ptr(dOut);
  args.kvKeys = ptr(dKeys);
  args.kvValues = ptr(dValues);
  args.positions = static_cast<const int *>(ptr(dPos));
  args.rowSequence = static_cast<const int *>(ptr(dRowSeq));
  args.seqFirstRow = static_cast<const int *>(ptr(dFirst));
  args.seqNumRows = static_cast<const int *>(ptr(dRows));
  args.blockTables = static_cast<const int *>(ptr(dTables));
  args.blockTableStride = static_cast<int>(stride);
  args.numSequences = static_cast<int>(sequences.size());
  args.rows = static_cast<int>(T);
  launchStep(kernel, args, T);
  std::vector<float> got = fromDevice(dOut, T * heads * D, act);
  EXPECT_LT(relativeError(got, want), tolerance(act)) << kernel.name;
  if (!naive.empty())
    EXPECT_LT(relativeError(got, naive), tolerance(act)) << "GPU vs naive, " << kernel.name;
  // The step's K/V landed in the same slots as on the CPU (rotated keys:
  // cos/sin may differ by an ulp between the device and the CPU's table).
  std::vector<float> keys = fromDevice(dKeys, cacheFloats, act);
  std::vector<float> values = fromDevice(dValues, cacheFloats, act);
  std::vector<float> gotKeys, wantKeys;
  for (int64_t t = 0; t < T; ++t) {
    int64_t s = rowSequence[t], pos = positions[t];
    int64_t slot = (tables[s * stride + pos / bs] * bs + pos % bs) * slotFloats;
    for (int64_t i = 0; i < slotFloats; ++i) {
      ASSERT_EQ(values[slot + i], layer.values[slot + i]) << kernel.name << " row " << t;
      gotKeys.push_back(keys[slot + i]);
      wantKeys.push_back(layer.keys[slot + i]);
    }
  }
  EXPECT_LE(relativeError(gotKeys, wantKeys), packed ? tolerance(act) : 0.0) << kernel.name;
}

TEST(GpuKernels, FlashDecodingAttentionMatchesCpu) {
  LLMC_REQUIRE_GPU();
  for (DType act : kActivations)
    checkAttention(act, /*decode=*/true);
}

TEST(GpuKernels, TiledPrefillAttentionMatchesCpu) {
  LLMC_REQUIRE_GPU();
  for (DType act : kActivations)
    checkAttention(act, /*decode=*/false);
}

TEST(GpuKernels, RopeAttentionOnPackedQkvMatchesCpu) {
  LLMC_REQUIRE_GPU();
  for (DType act : kActivations)
    for (bool decode : {true, false})
      checkAttention(act, decode, /*packed=*/true);
}

// Each RoPE variant rotated on the fly (q, and k as it enters the cache)
// against the CPU's attention with its per-pass tables.
TEST(GpuKernels, RopeVariantsInAttentionMatchCpu) {
  LLMC_REQUIRE_GPU();
  for (const RopeCase &c : kRopeCases)
    for (bool decode : {true, false}) {
      SCOPED_TRACE(std::string(c.name) + (decode ? " decode" : " prefill"));
      checkAttention(DType::BF16, decode, /*packed=*/true, kSmallAttention, {}, &c);
    }
}

// What the 8B benchmarks run: head_dim 128, 32 splits mostly empty at short
// contexts, a 4096 context, prefill row tiles spanning sequences.
TEST(GpuKernels, Llama3_8bShapeAttentionMatchesCpu) {
  LLMC_REQUIRE_GPU();
  for (bool decode : {true, false}) {
    checkAttention(DType::BF16, decode, /*packed=*/true, kLlama8bAttention);
    checkAttention(DType::BF16, decode, /*packed=*/false, kLlama8bAttention);
  }
}

// Sliding windows shorter than the sequences (16: one block; 100: several
// flash-decoding splits starting mid-block) with and without soft-capping,
// prefill tiles and decode, RoPE on packed qkv and plain; the cache before
// each window is NaN on the device. Then the 8B shape (32 splits) with a
// 1000 window over a 4096 context and a softcap (each changes the output
// far beyond the bf16 tolerance, so a kernel ignoring them fails).
TEST(GpuKernels, SlidingWindowSoftcapAttentionMatchesNaiveReference) {
  LLMC_REQUIRE_GPU();
  for (DType act : kActivations)
    for (bool decode : {true, false})
      for (bool packed : {false, true})
        for (hd::AttentionScores scores : {hd::AttentionScores{16, 0.0f},
                                           hd::AttentionScores{100, 1.0f},
                                           hd::AttentionScores{0, 1.0f}})
          checkAttention(act, decode, packed, kSmallAttention, scores);
  for (bool decode : {true, false})
    checkAttention(DType::BF16, decode, /*packed=*/true, kLlama8bAttention, {1000, 1.0f});
}

TEST(GpuKernels, RopeColumnsMatchesCpu) {
  LLMC_REQUIRE_GPU();
  ThreadPool pool(1);
  for (DType act : kActivations) {
    const int64_t heads = 2, D = 16, width = 96, column = 32, T = 5;
    MiniPlan p;
    int buf = p.buffer(act, width);
    auto k =
        p.kernel(fb::OpKind::Rope, {buf}, {buf}, {}, ropeParams(heads, D, column), 0, false, act);
    std::vector<float> x = rounded(randomValues(T * width, 19), act);
    std::vector<int32_t> positions = {3, 4, 5, 100, 250};
    std::vector<float> invFreq(D / 2);
    cpu::ropeInvFreqs(static_cast<int>(D), 10000.0f, hd::RopeScaling{}, invFreq.data());
    std::vector<float> table = cpu::ropeTable(300, static_cast<int>(D), invFreq.data());
    std::vector<float> want = x;
    cpu::rope(pool, want.data() + column, T, width, {heads, D, D}, positions.data(), table.data());
    auto dX = toDevice(encode(x, act));
    auto dPos = toDevice(positions);
    abi::StepArgs args{};
    args.in[0] = args.out = ptr(dX);
    args.positions = static_cast<const int *>(ptr(dPos));
    args.rows = T;
    launchStep(k, args, T);
    EXPECT_LT(relativeError(fromDevice(dX, x.size(), act), want), tolerance(act)) << k.name;
  }
}

// The fused linear kinds (RMSNorm prologue, SwiGLU epilogue) against the
// CPU's fused kernels, through the GEMV (maxTokens > 0) or the GEMM.
void checkFusedLinear(const LinearForm &op, DType act, int64_t N, int64_t K, int64_t T,
                      int64_t maxTokens) {
  ThreadPool pool(referenceThreads(N * K * T));
  const bool norm = op.norm;
  const bool swiglu = op.gated;
  const int64_t rows = swiglu ? 2 * N : N; // weight rows
  const float eps = 1e-5f;
  MiniPlan p;
  std::vector<int> weights;
  if (norm)
    weights.push_back(p.tensor(DType::F32, {K}));
  weights.push_back(p.tensor(act, {rows, K}));
  const bool bias = !swiglu; // with the residual add: the gated form has neither
  if (bias)
    weights.push_back(p.tensor(DType::F32, {N}));
  int in = p.buffer(act, K), out = p.buffer(act, N);
  auto k = p.kernel(fb::OpKind::Linear, {in}, {out}, weights,
                    linearParams({.norm = norm,
                                  .gate = swiglu ? fb::ActivationKind::Silu
                                                 : fb::ActivationKind::None,
                                  .bias = bias, .accumulate = bias}),
                    maxTokens, maxTokens > 0, act);
  std::vector<float> x = rounded(randomValues(T * K, 20), act);
  std::vector<float> gamma = randomValues(K, 21);
  std::vector<float> w = rounded(randomValues(rows * K, 22, 0.05f), act);
  std::vector<float> b = randomValues(N, 23);
  std::vector<float> y0 = rounded(randomValues(T * N, 24), act);
  std::vector<float> want = y0, scratch;
  cpu::WeightMatrix matrix{w.data(), DType::F32, rows, K};
  cpu::WeightVector g{gamma.data(), DType::F32, K};
  if (!swiglu)
    cpu::rmsNormMatmul(pool, x.data(), T, g, eps, matrix, b.data(), 1.0f, want.data(), scratch);
  else if (!norm)
    cpu::matmulSwiglu(pool, x.data(), T, matrix, want.data());
  else
    cpu::rmsNormMatmulSwiglu(pool, x.data(), T, g, eps, matrix, want.data(), scratch);
  auto dX = toDevice(encode(x, act));
  auto dGamma = toDevice(gamma);
  auto dW = toDevice(encode(w, act));
  auto dB = toDevice(b);
  auto dOut = bias ? toDevice(encode(y0, act)) : poisoned(T * N, act);
  std::vector<const cuda::DeviceBuffer *> slots;
  if (norm)
    slots.push_back(&dGamma);
  slots.push_back(&dW);
  if (bias)
    slots.push_back(&dB);
  expectStepOutput(k, dX, slots, dOut, T, N, act, want);
}

TEST(GpuKernels, FusedLinearKindsMatchCpu) {
  LLMC_REQUIRE_GPU();
  for (DType act : kActivations)
    for (const LinearForm &op : {kNormLinear, kGatedLinear, kNormGatedLinear}) {
      checkFusedLinear(op, act, 77, 136, 1, 1);
      checkFusedLinear(op, act, 77, 136, 3, 4);
      checkFusedLinear(op, act, 24, 4096, 2, 2);  // split-K (norm sums carried across)
      checkFusedLinear(op, act, 130, 200, 70, 0); // bf16: tensor cores
      checkFusedLinear(op, act, 67, 172, 33, 0);  // FMA
    }
}

// The 8B layers' shapes: o_proj, down_proj (K = 14336), gate/up with the
// norm and SwiGLU at N = 14336 (GEMV and tensor-core GEMM tiles).
TEST(GpuKernels, Llama3_8bShapeLinearsMatchCpu) {
  LLMC_REQUIRE_GPU();
  checkLinear(DType::BF16, 4096, 4096, 1, 1, false, true);
  checkLinear(DType::BF16, 4096, 14336, 1, 1, false, true);
  checkLinear(DType::BF16, 4096, 14336, 8, 8, false, true);
  checkLinear(DType::BF16, 4096, 14336, 33, 0, false, true);
  checkFusedLinear(kNormGatedLinear, DType::BF16, 14336, 4096, 1, 1);
  checkFusedLinear(kNormGatedLinear, DType::BF16, 14336, 4096, 33, 0);
  checkFusedLinear(kNormLinear, DType::BF16, 6144, 4096, 1, 1);
}

TEST(GpuKernels, LmHeadNormalizesAndGathersRows) {
  LLMC_REQUIRE_GPU();
  ThreadPool pool(1);
  for (DType act : kActivations)
    for (int64_t maxTokens : {4, 0}) {
      const int64_t V = 301, H = 64, T = 9;
      const float eps = 1e-5f;
      std::vector<int32_t> rows = {8, 0, 3};
      MiniPlan p;
      int gamma = p.tensor(DType::F32, {H}), w = p.tensor(act, {V, H});
      int in = p.buffer(act, H), out = p.buffer(DType::F32, V), ids = p.buffer(DType::I32, 1);
      auto k = p.kernel(fb::OpKind::LmHead, {in}, {out, ids}, {gamma, w}, logitsParams(true),
                        maxTokens, maxTokens > 0, act);
      std::vector<float> x = rounded(randomValues(T * H, 25), act);
      std::vector<float> g = randomValues(H, 26);
      std::vector<float> wv = rounded(randomValues(V * H, 27, 0.1f), act);
      std::vector<float> gathered, normed(rows.size() * H), want(rows.size() * V);
      for (int32_t r : rows)
        gathered.insert(gathered.end(), x.begin() + r * H, x.begin() + (r + 1) * H);
      cpu::rmsNorm(pool, gathered.data(), static_cast<int64_t>(rows.size()),
                   {g.data(), DType::F32, H}, eps, normed.data());
      cpu::matmul(pool, normed.data(), static_cast<int64_t>(rows.size()),
                  {wv.data(), DType::F32, V, H}, nullptr, 0.0f, want.data());
      auto dX = toDevice(encode(x, act));
      auto dG = toDevice(g);
      auto dW = toDevice(encode(wv, act));
      auto dRows = toDevice(rows);
      auto dOut = poisoned(T * V, DType::F32);
      abi::StepArgs args{};
      args.in[0] = ptr(dX);
      args.out = ptr(dOut);
      args.rows = T;
      args.logitRows = static_cast<const int *>(ptr(dRows));
      args.numLogitRows = static_cast<int>(rows.size());
      launchStep(k, args, static_cast<int64_t>(rows.size()), {ptr(dG), ptr(dW)});
      EXPECT_LT(relativeError(fromDevice(dOut, rows.size() * V, DType::F32), want),
                act == DType::F32 ? 2e-5 : 1e-2)
          << k.name;
    }
}

// W4A16: random int4 weights in the plan layout (q4_layout.h), against
// cpu::matmulQ4, through the GEMV and the dequantizing GEMM; the fused int4
// kinds (norm prologue, SwiGLU epilogue) against the CPU's rmsNorm and
// matmulSwigluQ4.
void checkLinearQ4(const LinearForm &op, DType act, int64_t N, int64_t K, int64_t G, int64_t T,
                   int64_t maxTokens, float outputScale = 1.0f) {
  ThreadPool pool(referenceThreads(N * K * T));
  const struct {
    bool norm, swiglu;
  } form{op.norm, op.gated};
  const int64_t rows = form.swiglu ? 2 * N : N; // weight rows
  const int64_t words = hd::q4WordsPerRow(K), groups = hd::q4NumGroups(K, G);
  const float eps = 1e-5f;
  std::mt19937 rng(28);
  std::vector<uint16_t> scales(rows * groups), zeros(rows * groups);
  for (size_t i = 0; i < scales.size(); ++i) {
    scales[i] = hd::f32ToF16(0.002f + 0.01f * static_cast<float>(rng() % 100) / 100.0f);
    zeros[i] = hd::f32ToF16(static_cast<float>(rng() % 16));
  }
  std::vector<uint32_t> qweight(rows * words, 0);
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t c = 0; c < words * 8; ++c) {
      // Pad columns hold the last group's zero point: they dequantize to 0.
      uint32_t q =
          c < K ? rng() % 16 : static_cast<uint32_t>(hd::f16ToF32(zeros[n * groups + groups - 1]));
      qweight[n * words + c / 8] |= q << (4 * (c % 8));
    }
  MiniPlan p;
  std::vector<int> weights;
  if (form.norm)
    weights.push_back(p.tensor(DType::F32, {K}));
  weights.push_back(p.tensor(DType::I32, {rows, words}));
  weights.push_back(p.tensor(DType::F16, {rows, groups}));
  weights.push_back(p.tensor(DType::F16, {rows, groups}));
  const bool bias = !form.swiglu, accumulate = !form.swiglu; // the gated forms have neither
  if (bias)
    weights.push_back(p.tensor(DType::F32, {N}));
  int in = p.buffer(act, K), out = p.buffer(act, N);
  auto k = p.kernel(fb::OpKind::Linear, {in}, {out}, weights,
                    scaledLinearParams({.norm = form.norm,
                                        .gate = form.swiglu ? fb::ActivationKind::Silu
                                                            : fb::ActivationKind::None,
                                        .q4 = true, .groupSize = G, .bias = bias,
                                        .accumulate = accumulate},
                                       outputScale),
                    maxTokens, maxTokens > 0, act);
  std::vector<float> x = rounded(randomValues(T * K, 29), act);
  std::vector<float> gamma = randomValues(K, 32);
  std::vector<float> b = randomValues(N, 30);
  std::vector<float> y0 = rounded(randomValues(T * N, 31), act);
  std::vector<float> want = y0, normed(T * K), products;
  const float *xin = x.data();
  if (form.norm) {
    cpu::rmsNorm(pool, x.data(), T, {gamma.data(), DType::F32, K}, eps, normed.data());
    xin = normed.data();
  }
  const std::vector<uint8_t> packedZeros = *cpu::packQ4Zeros(zeros.data(), rows, groups, "zeros");
  const cpu::Q4Matrix w{qweight.data(), scales.data(), packedZeros.data(), rows, K, G};
  cpu::setQ4ExactActivationsForTesting(true); // W4A16 like the GPU, not the CPU's int8 x
  if (form.swiglu) {
    cpu::matmulSwigluQ4(pool, xin, T, w, want.data(), products);
  } else if (outputScale == 1.0f) {
    cpu::matmulQ4(pool, xin, T, w, bias ? b.data() : nullptr, 1.0f, want.data());
  } else {
    std::vector<float> product(T * N);
    cpu::matmulQ4(pool, xin, T, w, bias ? b.data() : nullptr, 0.0f, product.data());
    want = scaledOutput(y0, product, outputScale, accumulate);
  }
  cpu::setQ4ExactActivationsForTesting(false);
  auto dX = toDevice(encode(x, act));
  auto dGamma = toDevice(gamma);
  auto dQ = toDevice(qweight);
  auto dS = toDevice(scales);
  auto dZ = toDevice(zeros);
  auto dB = toDevice(b);
  auto dOut = accumulate ? toDevice(encode(y0, act)) : poisoned(T * N, act);
  std::vector<const cuda::DeviceBuffer *> slots;
  if (form.norm)
    slots.push_back(&dGamma);
  for (const cuda::DeviceBuffer *part : {&dQ, &dS, &dZ})
    slots.push_back(part);
  if (bias)
    slots.push_back(&dB);
  expectStepOutput(k, dX, slots, dOut, T, N, act, want);
}

TEST(GpuKernels, Int4LinearMatchesCpu) {
  LLMC_REQUIRE_GPU();
  for (DType act : kActivations)
    for (const LinearForm &op : {kPlainLinear, kNormLinear, kGatedLinear, kNormGatedLinear}) {
      checkLinearQ4(op, act, 77, 256, 128, 1, 1);
      checkLinearQ4(op, act, 77, 200, 32, 3, 4); // K not a multiple of 32: padded rows
      checkLinearQ4(op, act, 130, 256, 64, 16, 16);
      checkLinearQ4(op, act, 45, 202, 64, 2, 2);  // x rows not 16-byte multiples: scalar loads
      checkLinearQ4(op, act, 67, 200, 32, 70, 0); // prefill: dequantizing GEMM
    }
}

// The 8B int4 layers (groups of 128): down_proj K = 14336, gate/up with
// the norm at N = 14336, batch 1 and 8.
TEST(GpuKernels, Llama3_8bShapeInt4LinearsMatchCpu) {
  LLMC_REQUIRE_GPU();
  checkLinearQ4(kPlainLinear, DType::BF16, 4096, 14336, 128, 1, 1);
  checkLinearQ4(kPlainLinear, DType::BF16, 4096, 14336, 128, 8, 8);
  checkLinearQ4(kNormGatedLinear, DType::BF16, 14336, 4096, 128, 1, 1);
  checkLinearQ4(kNormLinear, DType::BF16, 6144, 4096, 128, 1, 1);
  checkLinearQ4(kNormGatedLinear, DType::BF16, 14336, 4096, 128, 33, 0);
}

// Random int8 weights of `rows` rows in the plan layout (q8_layout.h) and
// their scales (f16 bits when halfScales).
struct Q8Weights {
  std::vector<int8_t> q;
  std::vector<float> scales;
  std::vector<uint16_t> halves;
  cpu::Q8Matrix matrix(int64_t firstRow, int64_t rows, int64_t K, int64_t G, bool half) const {
    const int64_t groups = hd::q8NumGroups(K, G);
    return {q.data() + firstRow * hd::q8RowBytes(K),
            half ? static_cast<const void *>(halves.data() + firstRow * groups)
                 : static_cast<const void *>(scales.data() + firstRow * groups),
            half, rows, K, G};
  }
};
Q8Weights randomQ8(int64_t rows, int64_t K, int64_t G, bool half, uint32_t seed) {
  const int64_t rowBytes = hd::q8RowBytes(K), groups = hd::q8NumGroups(K, G);
  std::mt19937 rng(seed);
  Q8Weights w;
  w.q.assign(rows * rowBytes, 0);
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t c = 0; c < K; ++c)
      w.q[n * rowBytes + c] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  w.scales.resize(rows * groups);
  w.halves.resize(rows * groups);
  for (size_t i = 0; i < w.scales.size(); ++i) {
    w.halves[i] = hd::f32ToF16(0.0005f + 0.002f * static_cast<float>(rng() % 100) / 100.0f);
    w.scales[i] = half ? hd::f16ToF32(w.halves[i]) : 0.0005f + 0.00001f * static_cast<float>(i % 97);
  }
  return w;
}

void checkFusedLinearQ8(const LinearForm &form, DType act, int64_t N, int64_t K, int64_t G,
                        bool half, int64_t T, int64_t maxTokens) {
  ThreadPool pool(referenceThreads(N * K * T));
  const int64_t rows = form.gated ? 2 * N : N;
  Q8Weights w = randomQ8(rows, K, G, half, 45);
  cuda::ops::Q8LinearShape shape;
  shape.n = N;
  shape.k = K;
  shape.groupSize = G;
  shape.halfScales = half;
  shape.activation = shape.output = act;
  shape.maxTokens = maxTokens;
  shape.norm = form.norm;
  shape.eps = 1e-5f;
  shape.gated = form.gated;
  auto k = cuda::ops::q8LinearKernel(shape);
  ASSERT_TRUE(k.isOk()) << k.message();
  std::vector<float> x = rounded(randomValues(T * K, 46), act);
  std::vector<float> gamma = randomValues(K, 47);
  std::vector<float> normed = x;
  if (form.norm)
    cpu::rmsNorm(pool, x.data(), T, {gamma.data(), DType::F32, K}, 1e-5f, normed.data());
  std::vector<float> want(T * N), up(T * N);
  cpu::matmulQ8(pool, normed.data(), T, w.matrix(0, N, K, G, half), nullptr, 0.0f, want.data());
  if (form.gated) {
    cpu::matmulQ8(pool, normed.data(), T, w.matrix(N, N, K, G, half), nullptr, 0.0f, up.data());
    cpu::swiglu(pool, want.data(), up.data(), want.data(), T * N);
  }
  auto dX = toDevice(encode(x, act));
  auto dG = toDevice(gamma);
  auto dQ = toDevice(w.q);
  auto dS = half ? toDevice(w.halves) : toDevice(w.scales);
  auto dOut = poisoned(T * N, act);
  std::vector<const cuda::DeviceBuffer *> weights = {&dQ, &dS};
  if (form.norm)
    weights.insert(weights.begin(), &dG);
  expectStepOutput(*k, dX, weights, dOut, T, N, act, want);
}

// W8A16: random int8 weights in the plan layout (q8_layout.h) against
// cpu::matmulQ8 (the same numerics on f32 x); bf16 activations rounded first.
// `form`: the fused forms of `--quantize int8` GPU programs (an RMSNorm
// prologue, SwiGLU over [gate; up] rows), as cpu/ops/linear.cpp's q8Linear
// computes them (the normalized rows, then matmulQ8, then swiglu); the
// plain form with a bias and a residual.
void checkLinearQ8(DType act, int64_t N, int64_t K, int64_t G, bool halfScales, int64_t T,
                   int64_t maxTokens, const LinearForm &form = kPlainLinear,
                   float outputScale = 1.0f) {
  ThreadPool pool(referenceThreads(N * K * T));
  if (form.norm || form.gated) {
    ASSERT_EQ(outputScale, 1.0f) << "the fused int8 forms are checked without an output_scale";
    checkFusedLinearQ8(form, act, N, K, G, halfScales, T, maxTokens);
    return;
  }
  const int64_t rowBytes = hd::q8RowBytes(K), groups = hd::q8NumGroups(K, G);
  std::mt19937 rng(41);
  std::vector<int8_t> q(N * rowBytes, 0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < K; ++c)
      q[n * rowBytes + c] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  std::vector<float> scales(N * groups);
  std::vector<uint16_t> halves(N * groups);
  for (size_t i = 0; i < scales.size(); ++i) {
    halves[i] = hd::f32ToF16(0.0005f + 0.002f * static_cast<float>(rng() % 100) / 100.0f);
    scales[i] = halfScales ? hd::f16ToF32(halves[i]) : 0.0005f + 0.00001f * static_cast<float>(i % 97);
  }
  cuda::ops::Q8LinearShape shape;
  shape.n = N;
  shape.k = K;
  shape.groupSize = G;
  shape.halfScales = halfScales;
  shape.activation = shape.output = act;
  shape.bias = shape.accumulate = true;
  shape.outScale = outputScale;
  shape.maxTokens = maxTokens;
  auto k = cuda::ops::q8LinearKernel(shape);
  ASSERT_TRUE(k.isOk()) << k.message();
  std::vector<float> x = rounded(randomValues(T * K, 42), act);
  std::vector<float> b = randomValues(N, 43);
  std::vector<float> y0 = rounded(randomValues(T * N, 44), act);
  std::vector<float> want = y0;
  const cpu::Q8Matrix w{q.data(),
                        halfScales ? static_cast<const void *>(halves.data())
                                   : static_cast<const void *>(scales.data()),
                        halfScales, N, K, G};
  if (outputScale == 1.0f) {
    cpu::matmulQ8(pool, x.data(), T, w, b.data(), 1.0f, want.data());
  } else {
    std::vector<float> product(T * N);
    cpu::matmulQ8(pool, x.data(), T, w, b.data(), 0.0f, product.data());
    want = scaledOutput(y0, product, outputScale, true);
  }
  auto dX = toDevice(encode(x, act));
  auto dQ = toDevice(q);
  auto dS = halfScales ? toDevice(halves) : toDevice(scales);
  auto dB = toDevice(b);
  auto dOut = toDevice(encode(y0, act));
  expectStepOutput(*k, dX, {&dQ, &dS, &dB}, dOut, T, N, act, want);
}

TEST(GpuKernels, Int8LinearMatchesCpu) {
  LLMC_REQUIRE_GPU();
  for (DType act : kActivations)
    for (bool half : {false, true}) {
      checkLinearQ8(act, 77, 256, 0, half, 1, 1);
      checkLinearQ8(act, 130, 200, 32, half, 3, 4);   // K not a multiple of 16
      checkLinearQ8(act, 96, 512, 128, half, 16, 16);
      checkLinearQ8(act, 67, 192, 64, half, 70, 0);   // prefill: tiles of 16 tokens
    }
  checkLinearQ8(DType::BF16, 4096, 14336, 0, false, 1, 1); // the 8B down_proj
}

TEST(GpuKernels, FusedInt8LinearsMatchCpu) {
  LLMC_REQUIRE_GPU();
  for (DType act : kActivations)
    for (const LinearForm *form : {&kNormLinear, &kGatedLinear, &kNormGatedLinear}) {
      SCOPED_TRACE(form->name);
      checkLinearQ8(act, 77, 256, 0, false, 1, 1, *form);
      checkLinearQ8(act, 130, 200, 32, true, 3, 4, *form); // K not a multiple of 16
      checkLinearQ8(act, 67, 192, 64, true, 37, 0, *form); // prefill tiles
    }
  checkLinearQ8(DType::BF16, 14336, 4096, 128, true, 1, 1, kNormGatedLinear); // the 8B gate/up
}

// A Linear's output_scale (Granite's residual_multiplier on o_proj and
// down_proj: plain, with the residual add at -O1, without it at -O0) in
// every weight format and kernel: the decode GEMVs (split-K too), the
// prefill GEMMs (tensor cores and FMA), int4 and int8; scale then residual,
// as the CPU.
TEST(GpuKernels, OutputScaledLinearsMatchCpu) {
  LLMC_REQUIRE_GPU();
  for (DType act : kActivations) {
    SCOPED_TRACE(name(act));
    for (bool accumulate : {true, false}) {
      checkLinear(act, 77, 136, 1, 1, false, accumulate, 0.5f);
      checkLinear(act, 77, 136, 3, 4, true, accumulate, 0.22f);
      checkLinear(act, 24, 4096, 2, 2, false, accumulate, 0.5f);  // split-K
      checkLinear(act, 130, 200, 70, 0, true, accumulate, 0.5f);  // bf16: tensor cores
      checkLinear(act, 67, 172, 33, 0, false, accumulate, 0.22f); // FMA
    }
    checkLinearQ4(kPlainLinear, act, 77, 256, 128, 1, 1, 0.5f);
    checkLinearQ4(kPlainLinear, act, 77, 200, 32, 3, 4, 0.22f);
    checkLinearQ4(kPlainLinear, act, 67, 200, 32, 70, 0, 0.5f); // dequantizing GEMM
    checkLinearQ8(act, 77, 256, 0, false, 1, 1, kPlainLinear, 0.5f);
    checkLinearQ8(act, 67, 192, 64, true, 70, 0, kPlainLinear, 0.22f); // tiles of 16
  }
}

TEST(GpuKernels, ArgmaxTakesTheFirstLargestAndIgnoresNan) {
  LLMC_REQUIRE_GPU();
  const int rows = 4, cols = 5003;
  std::vector<float> logits = randomValues(rows * cols, 18);
  logits[0 * cols + 100] = 50.0f; // a tie: the first wins
  logits[0 * cols + 4000] = 50.0f;
  logits[1 * cols + 7] = std::nanf("");
  for (int c = 0; c < cols; ++c) // all -inf: index 0
    logits[2 * cols + c] = -INFINITY;
  logits[3 * cols + cols - 1] = 99.0f;
  std::vector<int32_t> want(rows);
  cpu::argmax(logits.data(), rows, cols, want.data());
  cuda::KernelInstance k = cuda::argmaxKernel();
  cuda::CUfunction f = loadKernel(k);
  ASSERT_NE(f, nullptr);
  auto dLogits = toDevice(logits);
  auto dOut = toDevice(std::vector<int32_t>(rows, -1));
  abi::ArgmaxArgs args{static_cast<const float *>(ptr(dLogits)), static_cast<int *>(ptr(dOut)),
                       rows, cols};
  uint32_t grid[3] = {rows, 1, 1}, block[3] = {1024, 1, 1};
  ASSERT_TRUE(GpuContext::get().device->launch(f, grid, block, 0, &args).isOk());
  std::vector<int32_t> got(rows);
  ASSERT_TRUE(GpuContext::get().device->download(got.data(), dOut.get(), rows * 4).isOk());
  EXPECT_EQ(got, want);
}

// Top-k sampling candidates on the device against sampling::topKCandidates:
// ties, NaN, -0 and +0, -inf, temperatures, k up to kTopKMaxK, a row whose
// ties overflow the capacity, and a vocabulary like Llama 3's.
TEST(GpuKernels, TopKCandidatesMatchTheHost) {
  LLMC_REQUIRE_GPU();
  cuda::CUfunction f = loadKernel(cuda::topKKernel());
  ASSERT_NE(f, nullptr);
  constexpr int kCap = hd::kTopKCapacity;
  for (int cols : {300, 5003, 128256})
    for (float temperature : {1.0f, 0.7f})
      for (int k : {1, 17, hd::kTopKMaxK}) {
        const int rows = 4;
        std::vector<float> logits = randomValues(rows * cols, 40 + k);
        for (int i = 0; i < cols / 10; ++i) // exact ties
          logits[(i * 7919) % cols] = std::round(logits[(i * 7919) % cols] * 4.0f);
        logits[1 * cols + 3] = std::nanf("");
        logits[1 * cols + 4] = -0.0f;
        logits[1 * cols + 5] = 0.0f;
        logits[1 * cols + 6] = -INFINITY;
        for (int c = 0; c < cols; ++c) // row 2: all tie, past the capacity
          logits[2 * cols + c] = 1.5f;
        std::vector<float> wantScores(rows * kCap);
        std::vector<int32_t> wantIds(rows * kCap), wantCounts(rows);
        for (int r = 0; r < rows; ++r)
          wantCounts[r] =
              sampling::topKCandidates(logits.data() + r * cols, cols, k, temperature,
                                       wantScores.data() + r * kCap, wantIds.data() + r * kCap);
        auto dLogits = toDevice(logits);
        auto dScores = toDevice(std::vector<float>(rows * kCap, std::nanf("")));
        auto dIds = toDevice(std::vector<int32_t>(rows * kCap, -1));
        auto dCounts = toDevice(std::vector<int32_t>(rows, -1));
        abi::TopKArgs args{static_cast<const float *>(ptr(dLogits)),
                           static_cast<float *>(ptr(dScores)),
                           static_cast<int *>(ptr(dIds)),
                           static_cast<int *>(ptr(dCounts)),
                           rows,
                           cols,
                           k,
                           temperature};
        uint32_t grid[3] = {rows, 1, 1}, block[3] = {1024, 1, 1};
        ASSERT_TRUE(GpuContext::get().device->launch(f, grid, block, 0, &args).isOk());
        std::vector<float> scores(rows * kCap);
        std::vector<int32_t> ids(rows * kCap), counts(rows);
        auto &device = *GpuContext::get().device;
        ASSERT_TRUE(device.download(scores.data(), dScores.get(), scores.size() * 4).isOk());
        ASSERT_TRUE(device.download(ids.data(), dIds.get(), ids.size() * 4).isOk());
        ASSERT_TRUE(device.download(counts.data(), dCounts.get(), counts.size() * 4).isOk());
        ASSERT_EQ(counts, wantCounts) << "cols " << cols << " k " << k;
        EXPECT_GT(counts[2], kCap);
        for (int r = 0; r < rows; ++r)
          for (int i = 0; i < std::min(counts[r], kCap); ++i) {
            ASSERT_EQ(ids[r * kCap + i], wantIds[r * kCap + i]) << "row " << r << " rank " << i;
            ASSERT_EQ(scores[r * kCap + i], wantScores[r * kCap + i]);
          }
      }
}

TEST(GpuKernels, SyntheticFillGivesTheCpuValues) {
  LLMC_REQUIRE_GPU();
  for (DType dtype : {DType::F32, DType::BF16}) {
    const uint64_t count = 100003, first = 12345;
    fb::SyntheticInitT init;
    init.kind = fb::SyntheticKind::Normal;
    init.std = 0.02f;
    init.seed = 0x1234567890abcdefull;
    flatbuffers::FlatBufferBuilder builder;
    builder.Finish(fb::SyntheticInit::Pack(builder, &init));
    const auto *packed = flatbuffers::GetRoot<fb::SyntheticInit>(builder.GetBufferPointer());
    std::vector<uint8_t> want(count * dtypeSize(dtype));
    fillSynthetic(*packed, dtype, first, count, want.data());
    cuda::KernelInstance k = cuda::syntheticFillKernel(dtype);
    cuda::CUfunction f = loadKernel(k);
    ASSERT_NE(f, nullptr);
    auto dOut = poisoned(count, dtype);
    abi::SyntheticFillArgs args{ptr(dOut), count, first, init.seed, init.std, 0, 0, 0};
    uint32_t grid[3] = {264, 1, 1}, block[3] = {256, 1, 1};
    ASSERT_TRUE(GpuContext::get().device->launch(f, grid, block, 0, &args).isOk());
    std::vector<float> got = fromDevice(dOut, count, dtype);
    std::vector<float> expected = decode(want, dtype);
    // Device logf/cosf may differ from the host's by an ulp or two.
    EXPECT_LT(relativeError(got, expected), dtype == DType::F32 ? 1e-6 : 5e-3) << name(dtype);
  }
}

// The int4 parts of a synthetic plan: the CPU's bytes, up to rounding flips
// where the device's logf/cosf differ from the host's by an ulp (rare: a
// value must sit on a rounding boundary). cols = 1000: a ragged last group
// (104 of 128 columns) and 24 pad columns.
TEST(GpuKernels, SyntheticFillQ4GivesTheCpuBytes) {
  LLMC_REQUIRE_GPU();
  const int64_t rows = 37, cols = 1000, group = 128;
  const int64_t groups = hd::q4NumGroups(cols, group), words = hd::q4WordsPerRow(cols);
  cuda::CUfunction f = loadKernel(cuda::syntheticFillQ4Kernel());
  ASSERT_NE(f, nullptr);
  for (fb::SyntheticKind kind :
       {fb::SyntheticKind::Q4Weight, fb::SyntheticKind::Q4Scales, fb::SyntheticKind::Q4Zeros}) {
    fb::SyntheticInitT init;
    init.kind = kind;
    init.std = 0.02f;
    init.seed = 0x5eedull;
    init.cols = cols;
    init.group_size = group;
    flatbuffers::FlatBufferBuilder builder;
    builder.Finish(fb::SyntheticInit::Pack(builder, &init));
    const auto *packed = flatbuffers::GetRoot<fb::SyntheticInit>(builder.GetBufferPointer());
    const bool isWords = kind == fb::SyntheticKind::Q4Weight;
    const size_t elementBytes = isWords ? 4 : 2, count = rows * (isWords ? words : groups);
    std::vector<uint8_t> want(count * elementBytes);
    fillSyntheticQ4(*packed, 0, rows * groups, want.data());
    auto dOut = toDevice(std::vector<uint8_t>(want.size(), 0xff));
    abi::SyntheticFillArgs args{ptr(dOut), static_cast<unsigned long long>(rows * groups),
                                0,         init.seed,
                                init.std,  static_cast<int>(kind),
                                cols,      group};
    uint32_t grid[3] = {2, 1, 1}, block[3] = {256, 1, 1};
    ASSERT_TRUE(GpuContext::get().device->launch(f, grid, block, 0, &args).isOk());
    std::vector<uint8_t> got(want.size());
    ASSERT_TRUE(GpuContext::get().device->download(got.data(), dOut.get(), got.size()).isOk());
    size_t differing = 0;
    for (size_t i = 0; i < count; ++i)
      differing += std::memcmp(&got[i * elementBytes], &want[i * elementBytes], elementBytes) != 0;
    EXPECT_LE(differing, count / 200) << fb::EnumNameSyntheticKind(kind) << ": " << differing
                                      << " of " << count << " elements differ";
  }
}

} // namespace
} // namespace llmc::test
