// The f16 KV cache's row conversions (cpu/half_rows.h) on every ISA against
// the portable definitions of kernels/common/half.h, bit for bit: every f16
// pattern widened, and f32 values over the whole range narrowed (ties,
// subnormals, overflow, infinities, NaNs), at lengths with and without a
// partial last vector.
#include "cpu/half_rows.h"
#include "kernels/common/half.h"
#include "test_util.h"

#include <cstring>
#include <limits>

namespace llmc::cpu {
namespace {

uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Hard cases first (halfway ties at each end of the f16 range, the smallest
// subnormals, the largest finite values, infinities, NaNs with payloads),
// then random bit patterns.
std::vector<float> narrowingCases() {
  std::vector<float> cases = {0.0f,
                              -0.0f,
                              1.0f,
                              -1.0f,
                              65504.0f,
                              65519.99f,
                              65520.0f,
                              -65520.0f,
                              1e9f,
                              5.96e-8f,
                              2.98e-8f,
                              2.99e-8f,
                              6.1e-5f,
                              6.0975e-5f,
                              1.0009765f,
                              1.0004883f,
                              1.0014648f,
                              std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::denorm_min(),
                              floatOf(0x7fc00000u),
                              floatOf(0xffc12345u),
                              floatOf(0x7f801000u)};
  std::mt19937 rng(5);
  for (int i = 0; i < 20000; ++i)
    cases.push_back(floatOf(static_cast<uint32_t>(rng())));
  for (int e = -26; e <= 16; ++e) // around every f16 binade, ties included
    for (uint32_t m = 0; m < 64; ++m)
      cases.push_back(std::ldexp(1.0f + static_cast<float>(m) / 1024.0f + 1.0f / 2048.0f, e));
  return cases;
}

TEST(HalfRows, NarrowingGivesTheBitsOfTheScalarDefinition) {
  const std::vector<float> in = narrowingCases();
  for (Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    for (int64_t n :
         {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{13}, static_cast<int64_t>(in.size())}) {
      std::vector<uint16_t> out(n + 1, 0xabcd);
      f32ToF16Row(in.data(), out.data(), n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(out[i], hd::f32ToF16(in[i]))
            << isaName(isa) << " n " << n << " input bits " << std::hex << bitsOf(in[i]);
      EXPECT_EQ(out[n], 0xabcd) << "wrote past the row";
    }
  }
}

TEST(HalfRows, WideningIsExactForEveryPattern) {
  std::vector<uint16_t> in(65536 + 3);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = static_cast<uint16_t>(i);
  for (Isa isa : test::supportedIsas()) {
    test::ScopedIsa scoped(isa);
    std::vector<float> out(in.size() + 1, -7.0f);
    f16ToF32Row(in.data(), out.data(), static_cast<int64_t>(in.size()));
    for (size_t i = 0; i < in.size(); ++i)
      ASSERT_EQ(bitsOf(out[i]), bitsOf(hd::f16ToF32(in[i])))
          << isaName(isa) << " pattern " << std::hex << in[i];
    EXPECT_EQ(out[in.size()], -7.0f) << "wrote past the row";
  }
}

} // namespace
} // namespace llmc::cpu
