// Tests of the header-only math shared by the CPU and CUDA backends
// (runtime/kernels/common), on the host.
#include "kernels/common/half.h"
#include "kernels/common/int4.h"
#include "kernels/common/online_softmax.h"
#include "kernels/common/rope.h"
#include "kernels/common/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace llmc::hd {
namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round-to-nearest-even f32 -> bf16 worked out in double: the two bf16
// neighbours of f and the distance to each (the upper one may be 2^128).
uint16_t referenceBf16(float f) {
  uint32_t u = bitsOf(f);
  if (std::isnan(f))
    return 0x7fc0;
  uint16_t lowCode = static_cast<uint16_t>(u >> 16);
  if (std::isinf(f))
    return lowCode;
  double low = std::fabs(static_cast<double>(floatOf(u & 0xffff0000u)));
  // bf16 keeps 7 mantissa bits; subnormals are spaced 2^-133.
  double step =
      low < std::ldexp(1.0, -126) ? std::ldexp(1.0, -133) : std::ldexp(1.0, std::ilogb(low) - 7);
  double x = std::fabs(static_cast<double>(f));
  double dLow = x - low, dHigh = low + step - x;
  if (dLow < dHigh || (dLow == dHigh && (lowCode & 1) == 0))
    return lowCode;
  return static_cast<uint16_t>(lowCode + 1);
}

TEST(Bf16, WideningIsAShiftForEveryPattern) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    float f = bf16ToF32(static_cast<uint16_t>(h));
    EXPECT_EQ(bitsOf(f), h << 16);
  }
}

TEST(Bf16, RoundsToNearestEvenOnEdgeValues) {
  EXPECT_EQ(f32ToBf16(0.0f), 0x0000);
  EXPECT_EQ(f32ToBf16(-0.0f), 0x8000);
  EXPECT_EQ(f32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(f32ToBf16(floatOf(0x3f808000u)), 0x3f80); // tie, even stays
  EXPECT_EQ(f32ToBf16(floatOf(0x3f818000u)), 0x3f82); // tie, odd rounds up
  EXPECT_EQ(f32ToBf16(floatOf(0x3f808001u)), 0x3f81); // above the tie
  EXPECT_EQ(f32ToBf16(floatOf(0x7f7fffffu)), 0x7f80); // max float rounds to inf
  EXPECT_EQ(f32ToBf16(INFINITY), 0x7f80);
  EXPECT_EQ(f32ToBf16(-INFINITY), 0xff80);
  EXPECT_EQ(f32ToBf16(floatOf(0x00000001u)), 0x0000); // smallest subnormal
  EXPECT_EQ(f32ToBf16(floatOf(0x00018000u)), 0x0002); // subnormal tie, odd up
  EXPECT_EQ(f32ToBf16(NAN), 0x7fc0);
  EXPECT_EQ(f32ToBf16(floatOf(0xff800001u)), 0x7fc0); // signalling NaN, low payload
}

TEST(Bf16, MatchesADoubleReferenceOnRandomPatterns) {
  std::mt19937 rng(1);
  for (int i = 0; i < 2000000; ++i) {
    uint32_t u = rng();
    float f = floatOf(u);
    ASSERT_EQ(f32ToBf16(f), referenceBf16(f)) << std::hex << u;
  }
}

double referenceF16Value(uint16_t h) {
  int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double magnitude = exponent == 0 ? std::ldexp(mantissa, -24)
                                   : std::ldexp(1.0 + mantissa / 1024.0, exponent - 15);
  return (h & 0x8000) ? -magnitude : magnitude;
}

TEST(F16, WideningIsExactForEveryPattern) {
  for (uint32_t h = 0; h <= 0xffff; ++h) {
    float f = f16ToF32(static_cast<uint16_t>(h));
    int exponent = (h >> 10) & 0x1f;
    if (exponent == 0x1f && (h & 0x3ff) != 0) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_EQ(bitsOf(f) & 0x400000u, 0x400000u) << "quiet bit " << h;
      EXPECT_EQ((bitsOf(f) >> 13) & 0x1ff, h & 0x1ff) << "payload " << h;
    } else if (exponent == 0x1f) {
      EXPECT_EQ(f, (h & 0x8000) ? -INFINITY : INFINITY);
    } else {
      EXPECT_EQ(static_cast<double>(f), referenceF16Value(static_cast<uint16_t>(h))) << h;
      EXPECT_EQ(std::signbit(f), (h & 0x8000) != 0);
    }
  }
}

TEST(F16, NarrowingRoundTripsAndBreaksTiesToEven) {
  // Every finite f16 value round-trips; the midpoint of two neighbours goes to
  // the even code, and the floats just around it to the nearer code.
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    float a = f16ToF32(static_cast<uint16_t>(h));
    ASSERT_EQ(f32ToF16(a), h);
    ASSERT_EQ(f32ToF16(-a), h | 0x8000);
    double next = h + 1 < 0x7c00 ? referenceF16Value(static_cast<uint16_t>(h + 1)) : 65536.0;
    float mid = static_cast<float>((a + next) / 2); // exact: one more bit than f16
    uint16_t even = (h & 1) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h);
    ASSERT_EQ(f32ToF16(mid), even) << h;
    ASSERT_EQ(f32ToF16(std::nextafter(mid, 0.0f)), h) << h;
    ASSERT_EQ(f32ToF16(std::nextafter(mid, INFINITY)), h + 1) << h;
  }
}

TEST(F16, NarrowingEdgeValues) {
  EXPECT_EQ(f32ToF16(65504.0f), 0x7bff);
  EXPECT_EQ(f32ToF16(65520.0f), 0x7c00); // the tie above the max rounds to inf
  EXPECT_EQ(f32ToF16(std::nextafter(65520.0f, 0.0f)), 0x7bff);
  EXPECT_EQ(f32ToF16(1e10f), 0x7c00);
  EXPECT_EQ(f32ToF16(-INFINITY), 0xfc00);
  EXPECT_EQ(f32ToF16(std::ldexp(1.0f, -25)), 0x0000); // tie with zero: even
  EXPECT_EQ(f32ToF16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(f32ToF16(std::ldexp(1.0f, -14)), 0x0400); // smallest normal
  EXPECT_EQ(f32ToF16(floatOf(0x00000001u)), 0x0000);
  EXPECT_EQ(f32ToF16(-0.0f), 0x8000);
  EXPECT_EQ(f32ToF16(NAN) & 0x7e00, 0x7e00);
  EXPECT_EQ(f32ToF16(floatOf(0xff800001u)), 0xfe00); // sNaN: quieted, sign kept
}

#if defined(__x86_64__)
__attribute__((target("f16c"))) uint16_t hardwareF16(float f) {
  return static_cast<uint16_t>(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float hardwareF32(uint16_t h) { return _cvtsh_ss(h); }

TEST(F16, MatchesF16cBitForBit) {
  if (!__builtin_cpu_supports("avx2"))
    GTEST_SKIP() << "no F16C on this CPU";
  for (uint32_t h = 0; h <= 0xffff; ++h)
    ASSERT_EQ(bitsOf(f16ToF32(static_cast<uint16_t>(h))), bitsOf(hardwareF32(h))) << h;
  std::mt19937 rng(2);
  for (int i = 0; i < 2000000; ++i) {
    float f = floatOf(rng());
    ASSERT_EQ(f32ToF16(f), hardwareF16(f)) << std::hex << bitsOf(f);
  }
}
#endif

// HF modeling_rope_utils, transliterated in double.
double referenceInvFreq(int pair, int dim, double theta, const RopeScaling &s) {
  double inv = 1.0 / std::pow(theta, 2.0 * pair / dim);
  if (s.kind == RopeScalingKind::Linear)
    return inv / s.factor;
  if (s.kind != RopeScalingKind::Llama3)
    return inv;
  double lowFreqWavelen = s.originalMaxPositions / s.lowFreqFactor;
  double highFreqWavelen = s.originalMaxPositions / s.highFreqFactor;
  double wavelen = 2 * 3.14159265358979323846 / inv;
  double scaled = wavelen > lowFreqWavelen ? inv / s.factor : inv;
  if (wavelen >= highFreqWavelen && wavelen <= lowFreqWavelen) {
    double smooth =
        (s.originalMaxPositions / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
    scaled = (1 - smooth) * scaled / s.factor + smooth * scaled;
  }
  return scaled;
}

TEST(Rope, InverseFrequenciesFollowHf) {
  RopeScaling none;
  RopeScaling linear{RopeScalingKind::Linear, 4.0f};
  // Llama 3.1 / 3.2 rope_scaling.
  RopeScaling llama3{RopeScalingKind::Llama3, 8.0f, 1.0f, 4.0f, 8192.0f};
  RopeScaling llama32{RopeScalingKind::Llama3, 32.0f, 1.0f, 4.0f, 8192.0f};
  for (const RopeScaling &s : {none, linear, llama3, llama32})
    for (int dim : {8, 64, 128})
      for (float theta : {10000.0f, 500000.0f})
        for (int i = 0; i < dim / 2; ++i) {
          double expected = referenceInvFreq(i, dim, theta, s);
          EXPECT_NEAR(ropeInvFreq(i, dim, theta, s), expected, 2e-6 * expected)
              << "kind " << static_cast<int>(s.kind) << " dim " << dim << " pair " << i;
        }
}

TEST(Rope, Llama3KeepsHighAndScalesLowFrequencies) {
  RopeScaling s{RopeScalingKind::Llama3, 8.0f, 1.0f, 4.0f, 8192.0f};
  EXPECT_EQ(ropeInvFreq(0, 128, 500000.0f, s), 1.0f);
  float last = ropeDefaultInvFreq(63, 128, 500000.0f);
  EXPECT_FLOAT_EQ(ropeInvFreq(63, 128, 500000.0f, s), last / 8.0f);
  // The smooth band lies strictly between the two.
  int banded = 0;
  for (int i = 0; i < 64; ++i) {
    float base = ropeDefaultInvFreq(i, 128, 500000.0f), scaled = ropeInvFreq(i, 128, 500000.0f, s);
    EXPECT_LE(scaled, base);
    EXPECT_GE(scaled, base / 8.0f);
    banded += scaled < base && scaled > base / 8.0f;
  }
  EXPECT_GT(banded, 0);
}

TEST(Rope, RotatesPairsLikeComplexMultiplication) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-2, 2);
  for (int i = 0; i < 1000; ++i) {
    float x0 = dist(rng), x1 = dist(rng);
    int position = static_cast<int>(rng() % 100000);
    float inv = ropeDefaultInvFreq(static_cast<int>(rng() % 32), 64, 10000.0f);
    float angle = ropeAngle(position, inv);
    EXPECT_EQ(angle, static_cast<float>(position) * inv);
    float r0 = x0, r1 = x1;
    ropeRotate(r0, r1, cosF(angle), sinF(angle));
    double c = std::cos(static_cast<double>(angle)), s = std::sin(static_cast<double>(angle));
    EXPECT_NEAR(r0, x0 * c - x1 * s, 1e-5);
    EXPECT_NEAR(r1, x1 * c + x0 * s, 1e-5);
  }
}

TEST(OnlineSoftmax, MergingPiecesEqualsTheWholeSoftmax) {
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> dist(-30, 30);
  for (int trial = 0; trial < 100; ++trial) {
    int n = 1 + static_cast<int>(rng() % 50);
    std::vector<float> scores(n), values(n);
    for (int i = 0; i < n; ++i) {
      scores[i] = dist(rng);
      values[i] = dist(rng);
    }
    double maxScore = *std::max_element(scores.begin(), scores.end()), z = 0, expected = 0;
    for (int i = 0; i < n; ++i) {
      z += std::exp(scores[i] - maxScore);
      expected += std::exp(scores[i] - maxScore) * values[i];
    }
    expected /= z;
    // Fold random-sized pieces, each itself built by pushes.
    SoftmaxState state = softmaxEmpty();
    float acc = 0;
    for (int begin = 0; begin < n;) {
      int end = std::min(n, begin + 1 + static_cast<int>(rng() % 8));
      SoftmaxState piece = softmaxEmpty();
      float pieceAcc = 0;
      for (int i = begin; i < end; ++i) {
        SoftmaxMerge m = softmaxPush(piece, scores[i]);
        pieceAcc = pieceAcc * m.scaleA + values[i] * m.scaleB;
        piece = m.state;
      }
      SoftmaxMerge m = softmaxMerge(state, piece);
      acc = acc * m.scaleA + pieceAcc * m.scaleB;
      state = m.state;
      begin = end;
    }
    EXPECT_NEAR(acc * softmaxInvSum(state), expected, 1e-4 * (1 + std::fabs(expected)));
    EXPECT_NEAR(state.sum, z, 1e-5 * z);
  }
}

TEST(OnlineSoftmax, EmptyPiecesAreNeutralAndNeverNaN) {
  SoftmaxMerge both = softmaxMerge(softmaxEmpty(), softmaxEmpty());
  EXPECT_EQ(both.state.sum, 0.0f);
  EXPECT_FALSE(std::isnan(both.scaleA) || std::isnan(both.scaleB));
  EXPECT_EQ(softmaxInvSum(both.state), 0.0f);
  SoftmaxMerge one = softmaxMerge(softmaxEmpty(), SoftmaxState{3.0f, 2.0f});
  EXPECT_EQ(one.state.max, 3.0f);
  EXPECT_EQ(one.state.sum, 2.0f);
  EXPECT_EQ(one.scaleA, 0.0f);
  EXPECT_EQ(one.scaleB, 1.0f);
}

TEST(Int4, UnpacksPacksAndDequantizes) {
  i32 values[8] = {0, 15, 7, 8, 1, 14, 3, 12};
  u32 word = int4Pack8(values);
  EXPECT_EQ(word, 0xc3e187f0u);
  i32 out[8];
  int4Unpack8(word, out);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(out[i], values[i]);
    EXPECT_EQ(int4Unpack(word, i), values[i]);
  }
  // AWQ order: nibble j holds logical column {0,2,4,6,1,3,5,7}[j].
  const i32 awqPack[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  i32 interleaved[8];
  for (int j = 0; j < 8; ++j)
    interleaved[j] = values[awqPack[j]];
  const i32 awqRead[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  int4Unpack8Ordered(int4Pack8(interleaved), awqRead, out);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(out[i], values[i]);
  EXPECT_EQ(int4Dequant(15, 8, 0.5f), 3.5f);
  EXPECT_EQ(int4Dequant(0, 8, 0.25f), -2.0f);
}

TEST(SamplingRules, FollowHfProcessors) {
  EXPECT_EQ(repetitionPenalty(2.0f, 2.0f), 1.0f);
  EXPECT_EQ(repetitionPenalty(-2.0f, 2.0f), -4.0f);
  EXPECT_EQ(repetitionPenalty(0.0f, 2.0f), 0.0f);
  const float probs[] = {0.5f, 0.3f, 0.15f, 0.05f};
  EXPECT_EQ(topPKeepCount(probs, 4, 0.8f), 2);  // 0.5 < 0.8 keeps the second
  EXPECT_EQ(topPKeepCount(probs, 4, 0.81f), 3); // 0.8 < 0.81 keeps the third
  EXPECT_EQ(topPKeepCount(probs, 4, 0.5f), 1);  // mass 0.5 is not below 0.5
  EXPECT_EQ(topPKeepCount(probs, 4, 0.01f), 1);
  EXPECT_EQ(topPKeepCount(probs, 4, 1.0f), 4);
  EXPECT_TRUE(minPKeeps(5.0f, 5.0f, 1.0f));
  EXPECT_TRUE(minPKeeps(5.0f + std::log(0.11f), 5.0f, 0.1f));
  EXPECT_FALSE(minPKeeps(5.0f + std::log(0.09f), 5.0f, 0.1f));
  EXPECT_TRUE(topKKeeps(1.0f, 1.0f));
  EXPECT_FALSE(topKKeeps(0.5f, 1.0f));
}

} // namespace
} // namespace llmc::hd
