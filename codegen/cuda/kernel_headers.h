// The headers generated kernels include, embedded into the compiler at build
// time (codegen/cuda/embed_headers.cmake): the kernel templates of
// codegen/cuda/kernels/ as "llmc/<file>", the runtime's kernel calling
// convention "cuda/kernel_abi.h", and the shared host/device math
// "kernels/common/<file>.h". NVRTC receives them as in-memory headers.
#pragma once

#include <string>
#include <vector>

namespace llmc::cuda {

struct EmbeddedHeader {
  const char *name; // the #include name
  const char *text;
};

const std::vector<EmbeddedHeader> &kernelHeaders();

} // namespace llmc::cuda
