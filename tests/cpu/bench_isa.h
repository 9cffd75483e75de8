// The microbenchmarks' LLMC_BENCH_ISA: a name isaName prints (scalar, avx2,
// avx512, neon) runs that supported ISA's kernels instead of the best one,
// to compare two ISAs' kernels on one machine. LLMC_BENCH_VNNI=0 runs the
// int4 kernel's vpmaddubsw path on a CPU with AVX-512 VNNI;
// LLMC_BENCH_BF16DOT=0 runs bf16 weights on the f32 FMA kernels on a CPU
// with AVX512-BF16.
#pragma once

#include "cpu/isa.h"

#include <cstdio>
#include <cstdlib>
#include <string>

namespace llmc::bench {

// Applies LLMC_BENCH_VNNI and LLMC_BENCH_ISA; false (after an error message) when it names no
// ISA this CPU supports.
inline bool applyBenchIsa() {
  const char *vnni = std::getenv("LLMC_BENCH_VNNI");
  if (vnni != nullptr && std::string(vnni) == "0")
    cpu::setX86VnniForTesting(false);
  const char *bf16Dot = std::getenv("LLMC_BENCH_BF16DOT");
  if (bf16Dot != nullptr && std::string(bf16Dot) == "0")
    cpu::setX86Bf16ForTesting(false);
  const char *name = std::getenv("LLMC_BENCH_ISA");
  if (name == nullptr)
    return true;
  using cpu::Isa;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon})
    if (std::string(name) == cpu::isaName(isa) && cpu::setIsaForTesting(isa))
      return true;
  std::fprintf(stderr, "error: LLMC_BENCH_ISA=%s is not a supported ISA here\n", name);
  return false;
}

} // namespace llmc::bench
