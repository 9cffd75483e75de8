// Device helpers shared by the generated kernels: element types, 16-byte
// vector loads, warp and block reductions. Compiled by NVRTC only (the
// compiler embeds this text; codegen/cuda/kernel_headers.h), with the shared
// host/device math of runtime/kernels/common on the include path.
#pragma once

#include "cuda/kernel_abi.h"
#include "kernels/common/half.h"

namespace llmc::dev {

using hd::u16;
using hd::u32;
using i64 = long long;

// Storage types of 16-bit floats: raw bits, converted with the exact
// integer-only routines of half.h (the CPU backend uses the same ones).
struct bf16 {
  u16 bits;
};
struct f16 {
  u16 bits;
};

__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(bf16 v) { return hd::bf16ToF32(v.bits); }
__device__ __forceinline__ float toFloat(f16 v) { return hd::f16ToF32(v.bits); }

template <class T> __device__ __forceinline__ T fromFloat(float v);
template <> __device__ __forceinline__ float fromFloat<float>(float v) { return v; }
template <> __device__ __forceinline__ bf16 fromFloat<bf16>(float v) { return {hd::f32ToBf16(v)}; }
template <> __device__ __forceinline__ f16 fromFloat<f16>(float v) { return {hd::f32ToF16(v)}; }

// An unsigned integer type of exactly BYTES bytes, for vector memory access.
template <int BYTES> struct RawVec;
template <> struct RawVec<16> { using type = uint4; };
template <> struct RawVec<8> { using type = uint2; };
template <> struct RawVec<4> { using type = unsigned int; };
template <> struct RawVec<2> { using type = unsigned short; };

// Loads N consecutive elements at p (aligned to N * sizeof(T)) as floats,
// in one memory access of N * sizeof(T) bytes.
template <int N, class T> __device__ __forceinline__ void loadVec(const T *p, float (&out)[N]) {
  using V = typename RawVec<N * sizeof(T)>::type;
  union {
    V raw;
    T elems[N];
  } u;
  u.raw = *reinterpret_cast<const V *>(p);
#pragma unroll
  for (int i = 0; i < N; ++i)
    out[i] = toFloat(u.elems[i]);
}

// Loads N consecutive elements at p as floats in accesses of at most 16
// bytes (N * sizeof(T) > 16: several, e.g. 8 f32 gamma values as two).
template <int N, class T> __device__ __forceinline__ void loadVecWide(const T *p, float (&out)[N]) {
  constexpr int kPiece = N * sizeof(T) > 16 ? 16 / static_cast<int>(sizeof(T)) : N;
#pragma unroll
  for (int c = 0; c < N / kPiece; ++c) {
    float piece[kPiece];
    loadVec<kPiece>(p + c * kPiece, piece);
#pragma unroll
    for (int e = 0; e < kPiece; ++e)
      out[c * kPiece + e] = piece[e];
  }
}

// Stores N floats converted to T at p (aligned to N * sizeof(T)), one access.
template <int N, class T> __device__ __forceinline__ void storeVec(T *p, const float (&in)[N]) {
  using V = typename RawVec<N * sizeof(T)>::type;
  union {
    V raw;
    T elems[N];
  } u;
#pragma unroll
  for (int i = 0; i < N; ++i)
    u.elems[i] = fromFloat<T>(in[i]);
  *reinterpret_cast<V *>(p) = u.raw;
}

__device__ __forceinline__ float warpSum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warpMax(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    v = hd::maxF(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over the block (BLOCK threads, a multiple of 32); every thread gets it.
// `scratch` holds at least 32 floats; the call synchronizes the block twice.
template <int BLOCK> __device__ __forceinline__ float blockSum(float v, float *scratch) {
  constexpr int kWarps = BLOCK / 32;
  v = warpSum(v);
  if (threadIdx.x % 32 == 0)
    scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w)
    total += scratch[w];
  __syncthreads();
  return total;
}

// Reads a float written by another block of the same grid (after its
// __threadfence): through L2, not the non-coherent L1.
__device__ __forceinline__ float loadCoherent(const float *p) { return __ldcg(p); }

// Split reductions (split-K GEMV, flash-decoding): after a block wrote its
// partial results, it calls this; exactly one block per counter (the last of
// `expected` to arrive) gets true, and that block resets the counter to zero
// for the next launch. Every thread of the block must call it.
__device__ __forceinline__ bool arriveLast(int *counter, int expected) {
  __shared__ int last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    int previous = atomicAdd(counter, 1);
    last = previous == expected - 1;
    if (last)
      atomicExch(counter, 0);
  }
  __syncthreads();
  if (last)
    __threadfence();
  return last;
}

} // namespace llmc::dev
