// Which x86-64 vector instruction set the CPU kernels use. One binary runs on
// any x86-64: kernels for wider ISAs are compiled with function-level target
// attributes and chosen at run time from what the CPU reports.
#pragma once

namespace llmc::cpu {

enum class Isa {
  Scalar, // portable C++ (any CPU)
  Avx2,   // AVX2 + FMA + F16C
  Avx512, // AVX-512 F/BW/VL + AVX2 + FMA + F16C
};

const char *isaName(Isa isa);

// Whether this CPU can run kernels for `isa`.
bool isaSupported(Isa isa);

// The ISA the kernels use now: the best supported one, unless a test forced another.
Isa activeIsa();

// Test hook: forces `isa` for all later kernel calls. Returns false (and
// changes nothing) when the CPU does not support it. Not thread-safe with
// kernels running.
bool setIsaForTesting(Isa isa);

} // namespace llmc::cpu
