// What the fake libcublasLt (fake_libcublaslt.cpp) records of each
// cublasLtMatmul call, and the functions the test reads it with (resolved
// with dlsym: the test does not link the fake).
#pragma once

#include <cstddef>
#include <cstdint>

namespace llmc::test {

// One matrix layout: column-major rows x cols, ld elements between columns.
struct FakeLtLayout {
  int type = -1; // cudaDataType_t
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0;
};

struct FakeLtMatmul {
  FakeLtLayout a, b, c, d;
  bool sameCdLayout = false; // Cdesc == Ddesc
  int computeType = -1, scaleType = -1;
  int32_t transA = 0, transB = 0;
  uint32_t epilogue = 0;
  int32_t biasType = -1;
  const void *bias = nullptr;
  const void *pa = nullptr, *pb = nullptr, *pc = nullptr, *pd = nullptr;
  float alpha = 0.0f, beta = 0.0f;
  const void *workspace = nullptr;
  size_t workspaceBytes = 0;
  void *stream = nullptr;
  bool captured = false; // enqueued while the fake libcuda was capturing a graph
};

// extern "C" entry points of the fake, by name.
using FakeLtCount = long (*)();
using FakeLtGet = const FakeLtMatmul *(*)(long index);
using FakeLtSet = void (*)(int value);
using FakeLtText = const char *(*)();

} // namespace llmc::test
