// f32 <-> f16 rows, for the f16 KV cache (kv/kv_cache.h): the bits of
// hd::f32ToF16 and hd::f16ToF32 (round to nearest even, NaN stays NaN) on
// every ISA, 8 lanes per instruction with F16C on x86 and 4 with NEON.
#pragma once

#include <cstdint>

namespace llmc::cpu {

void f32ToF16Row(const float *in, uint16_t *out, int64_t n);
void f16ToF32Row(const uint16_t *in, float *out, int64_t n);

} // namespace llmc::cpu
