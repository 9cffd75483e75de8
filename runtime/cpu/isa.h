// Which vector instruction set the CPU kernels use. One binary runs on any
// CPU of its architecture: on x86-64, kernels for wider ISAs are compiled
// with function-level target attributes and chosen at run time from what the
// CPU reports; on AArch64, Advanced SIMD (NEON) is part of the base
// architecture, and only the int4 kernels' dot-product instructions
// (SDOT, an optional extension) are chosen at run time.
#pragma once

#include <string>

namespace llmc::cpu {

// The ISAs of both architectures; a CPU supports Scalar and those of its own
// architecture only (isaSupported), so no order holds across them.
enum class Isa {
  Scalar, // portable C++ (any CPU)
  Avx2,   // x86-64: AVX2 + FMA + F16C
  Avx512, // x86-64: AVX-512 F/BW/VL + AVX2 + FMA + F16C
  Neon,   // AArch64: Advanced SIMD; int4 uses SDOT where neonDotProdSupported()
};

const char *isaName(Isa isa);

// The kernels' instruction set now, as llmrun's "running on" line shows it:
// isaName(activeIsa()), with " + vnni" where the x86 int4 kernel takes
// vpdpbusd, " + bf16" where bf16 weights take vdpbf16ps (x86Bf16Active) and
// " + dotprod" where the NEON int4 kernel takes SDOT.
std::string activeKernelsName();

// Whether this CPU can run kernels for `isa`.
bool isaSupported(Isa isa);

// The ISA the kernels use now: the best supported one, unless a test forced another.
Isa activeIsa();

// Test hook: forces `isa` for all later kernel calls. Returns false (and
// changes nothing) when the CPU does not support it. Not thread-safe with
// kernels running.
bool setIsaForTesting(Isa isa);

// Whether this AArch64 CPU has the Armv8.2 dot-product instructions
// (getauxval(AT_HWCAP) & HWCAP_ASIMDDP). False on every other CPU.
bool neonDotProdSupported();

// Whether the NEON int4 kernels use SDOT now: neonDotProdSupported(), unless
// a test turned it off.
bool neonDotProdActive();

// Test hook: with `use` false, the NEON int4 kernels take the widening
// multiply-add path (SMULL/SADALP) that CPUs without dotprod run. Returns
// false (and changes nothing) when `use` is true and the CPU lacks dotprod.
// Not thread-safe with kernels running.
bool setNeonDotProdForTesting(bool use);

// Whether this x86-64 CPU has AVX-512 VNNI with AVX-512 VL (vpdpbusd on
// 256-bit registers: Ice Lake and later Xeons, Zen 4). False elsewhere.
bool x86VnniSupported();

// Whether the AVX2 int4 kernel takes its dot products with vpdpbusd now:
// x86VnniSupported() and the AVX-512 ISA active (a forced AVX2 runs what an
// AVX2 machine runs), unless a test turned it off. vpdpbusd sums the same 4 products per 32-bit
// lane as vpmaddubsw + vpmaddwd, so the outputs have the same bits either way.
bool x86VnniActive();

// Test hook: with `use` false, the int4 kernel takes the vpmaddubsw path
// that CPUs without VNNI run. Returns false (and changes nothing) when `use`
// is true and the CPU lacks VNNI. Not thread-safe with kernels running.
bool setX86VnniForTesting(bool use);

// Whether this x86-64 CPU has AVX512-BF16 (vdpbf16ps: Cooper Lake and
// Sapphire Rapids Xeons and later, Zen 4 and later). False elsewhere.
bool x86Bf16Supported();

// Whether bf16 weights run the bf16 dot-product kernels now
// (matmul_bf16_avx512.cpp): x86Bf16Supported() and the AVX-512 ISA active,
// unless the environment (LLMC_CPU_BF16_DOT=0, read once) or a test turned
// them off. They round x to bf16 (round to nearest even) and sum pairs of
// exact bf16 products into f32 lanes with vdpbf16ps, as llama.cpp and oneDNN
// do on these CPUs: twice the multiply-adds per instruction of the f32 FMAs
// that every other CPU (and this one with them off) runs on bf16 weights
// widened to f32, with x kept in f32. Decode and prefill take the same sums
// either way, so a token gets the same bits on both paths.
bool x86Bf16Active();

// Test hook: turns the bf16 dot-product kernels on or off. Returns false (and
// changes nothing) when `use` is true and the CPU lacks AVX512-BF16. Not
// thread-safe with kernels running.
bool setX86Bf16ForTesting(bool use);

// Whether this x86-64 CPU has AVX512-VBMI (vpermb, vpmultishiftqb: Ice Lake
// and later, Zen 4 and later). False elsewhere. The bf16 kernels' coded
// rows (cpu/bf16_coded.h) need it.
bool x86VbmiSupported();

// Bytes of L2 cache per core (sysconf(_SC_LEVEL2_CACHE_SIZE) where the C
// library reports it), or 0 when unknown. Read once.
long l2CacheBytes();

} // namespace llmc::cpu
