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
// vpdpbusd and " + dotprod" where the NEON one takes SDOT.
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
// AVX2 machine runs), unless a test turned it off. vpdpbusd sums the same 4 products per 32-bit lane as
// vpmaddubsw + vpmaddwd, so the outputs have the same bits either way.
bool x86VnniActive();

// Test hook: with `use` false, the int4 kernel takes the vpmaddubsw path
// that CPUs without VNNI run. Returns false (and changes nothing) when `use`
// is true and the CPU lacks VNNI. Not thread-safe with kernels running.
bool setX86VnniForTesting(bool use);

// Bytes of L2 cache per core (sysconf(_SC_LEVEL2_CACHE_SIZE) where the C
// library reports it), or 0 when unknown. Read once.
long l2CacheBytes();

} // namespace llmc::cpu
