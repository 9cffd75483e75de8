// A stand-in for libcublasLt.so.13 for the CUDA backend's host-side tests
// (no GPU; works with fake_libcuda.cpp, whose device memory is host
// memory): descriptors are host objects, the heuristic returns one tagged
// algorithm, and cublasLtMatmul checks its call (live descriptors, an
// algorithm from the heuristic, consistent shapes, every matrix, the bias
// and the workspace inside live device allocations, no descriptor or
// heuristic work while a CUDA graph is being captured), records it
// (fake_cublaslt.h) and computes it by BLAS's column-major definition with
// bf16 matrices, f32 accumulation and an f32 or bf16 bias.
#include "cuda/fake_cublaslt.h"
#include "kernels/common/half.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace {

using llmc::test::FakeLtLayout;
using llmc::test::FakeLtMatmul;

constexpr int kOk = 0, kInvalidValue = 7, kNotSupported = 15;
constexpr uint64_t kAlgoTag = 0x4c4c4d43414c474full; // marks algorithms the heuristic returned
constexpr size_t kAlgoWorkspace = size_t(1) << 20;

struct Desc {
  int computeType = -1, scaleType = -1;
  int32_t transA = 0, transB = 0;
  uint32_t epilogue = 1;
  int32_t biasType = -1;
  const void *bias = nullptr;
};

struct Preference {
  uint64_t maxWorkspace = 0;
  uint32_t alignment[4] = {256, 256, 256, 256};
};

struct State {
  std::mutex mutex;
  std::set<void *> handles;
  std::map<void *, Desc> descs;
  std::map<void *, FakeLtLayout> layouts;
  std::map<void *, Preference> preferences;
  std::vector<FakeLtMatmul> matmuls;
  std::string error; // first violation seen
  bool noAlgorithm = false;
};

State &state() {
  static State s;
  return s;
}

void fail(const std::string &what) {
  if (state().error.empty())
    state().error = what;
}

// The fake libcuda's view of device memory and capture, when it is loaded.
template <typename Fn> Fn fakeCuda(const char *name) {
  const char *path = std::getenv("LLMC_LIBCUDA");
  void *library = path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  return library ? reinterpret_cast<Fn>(dlsym(library, name)) : nullptr;
}
bool capturing() {
  auto f = fakeCuda<int (*)()>("fakeCudaCapturing");
  return f != nullptr && f() != 0;
}
void checkInside(const void *p, size_t bytes, const std::string &what) {
  auto f = fakeCuda<int (*)(const void *, size_t)>("fakeCudaInside");
  if (f != nullptr && !f(p, bytes))
    fail("cublasLtMatmul: " + what + " [" + std::to_string(bytes) +
         " bytes] lies outside every device allocation");
}

void noCapture(const char *call) {
  if (capturing())
    fail(std::string(call) + " while a CUDA graph is being captured (it must come before)");
}

template <typename T> T *object(std::map<void *, T> &objects, void *key, const char *what) {
  auto it = objects.find(key);
  if (it == objects.end()) {
    fail(std::string("unknown or destroyed ") + what);
    return nullptr;
  }
  return &it->second;
}

template <typename T> int setValue(T &slot, const void *value, size_t bytes, const char *what) {
  if (bytes != sizeof(T)) {
    fail(std::string(what) + ": value of " + std::to_string(bytes) + " bytes, expected " +
         std::to_string(sizeof(T)));
    return kInvalidValue;
  }
  std::memcpy(&slot, value, sizeof(T));
  return kOk;
}

// D = alpha op(A) op(B) + beta C (+ bias), column-major, bf16 matrices.
void compute(const FakeLtMatmul &m) {
  auto at = [](const void *p, const FakeLtLayout &l, bool trans, uint64_t i, uint64_t j) {
    uint64_t row = trans ? j : i, col = trans ? i : j;
    return llmc::hd::bf16ToF32(static_cast<const uint16_t *>(p)[row + col * l.ld]);
  };
  uint64_t k = m.transA ? m.a.rows : m.a.cols;
  for (uint64_t j = 0; j < m.d.cols; ++j)
    for (uint64_t i = 0; i < m.d.rows; ++i) {
      float sum = 0.0f;
      for (uint64_t x = 0; x < k; ++x)
        sum += at(m.pa, m.a, m.transA != 0, i, x) * at(m.pb, m.b, m.transB != 0, x, j);
      float y = m.alpha * sum;
      if (m.beta != 0.0f)
        y += m.beta * at(m.pc, m.c, false, i, j);
      if (m.epilogue == 4)
        y += m.biasType == 0 ? static_cast<const float *>(m.bias)[i]
                             : llmc::hd::bf16ToF32(static_cast<const uint16_t *>(m.bias)[i]);
      static_cast<uint16_t *>(const_cast<void *>(m.pd))[i + j * m.d.ld] = llmc::hd::f32ToBf16(y);
    }
}

// Bytes a column-major layout spans with elements of `elementBytes`.
size_t span(const FakeLtLayout &l, size_t elementBytes) {
  return l.cols == 0 ? 0 : ((l.cols - 1) * l.ld + l.rows) * elementBytes;
}

} // namespace

extern "C" {

// --- What the test reads. ---
long fakeLtMatmuls() { return static_cast<long>(state().matmuls.size()); }
const FakeLtMatmul *fakeLtMatmul(long index) { return &state().matmuls.at(index); }
void fakeLtReset() {
  std::lock_guard<std::mutex> lock(state().mutex);
  state().matmuls.clear();
  state().error.clear();
}
void fakeLtSetNoAlgorithm(int value) { state().noAlgorithm = value != 0; }
const char *fakeLtError() { return state().error.c_str(); }
long fakeLtLiveObjects() {
  State &s = state();
  return static_cast<long>(s.handles.size() + s.descs.size() + s.layouts.size() +
                           s.preferences.size());
}

// --- The cuBLASLt subset of runtime/cuda/cublaslt.cpp. ---
int cublasLtCreate(void **handle) {
  std::lock_guard<std::mutex> lock(state().mutex);
  noCapture("cublasLtCreate");
  *handle = new int(0);
  state().handles.insert(*handle);
  return kOk;
}
int cublasLtDestroy(void *handle) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().handles.erase(handle) == 0)
    return fail("cublasLtDestroy of an unknown handle"), kInvalidValue;
  delete static_cast<int *>(handle);
  return kOk;
}
size_t cublasLtGetVersion() { return 130100; }

int cublasLtMatmulDescCreate(void **desc, int computeType, int scaleType) {
  std::lock_guard<std::mutex> lock(state().mutex);
  noCapture("cublasLtMatmulDescCreate");
  *desc = new int(0);
  Desc &d = state().descs[*desc];
  d.computeType = computeType;
  d.scaleType = scaleType;
  return kOk;
}
int cublasLtMatmulDescDestroy(void *desc) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().descs.erase(desc) == 0)
    return fail("cublasLtMatmulDescDestroy of an unknown descriptor"), kInvalidValue;
  delete static_cast<int *>(desc);
  return kOk;
}
int cublasLtMatmulDescSetAttribute(void *desc, int attribute, const void *value, size_t bytes) {
  std::lock_guard<std::mutex> lock(state().mutex);
  Desc *d = object(state().descs, desc, "matmul descriptor");
  if (d == nullptr)
    return kInvalidValue;
  switch (attribute) {
  case 3:
    return setValue(d->transA, value, bytes, "CUBLASLT_MATMUL_DESC_TRANSA");
  case 4:
    return setValue(d->transB, value, bytes, "CUBLASLT_MATMUL_DESC_TRANSB");
  case 7:
    return setValue(d->epilogue, value, bytes, "CUBLASLT_MATMUL_DESC_EPILOGUE");
  case 8:
    return setValue(d->bias, value, bytes, "CUBLASLT_MATMUL_DESC_BIAS_POINTER");
  case 26:
    return setValue(d->biasType, value, bytes, "CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE");
  default:
    fail("unexpected matmul descriptor attribute " + std::to_string(attribute));
    return kInvalidValue;
  }
}

int cublasLtMatrixLayoutCreate(void **layout, int type, uint64_t rows, uint64_t cols, int64_t ld) {
  std::lock_guard<std::mutex> lock(state().mutex);
  noCapture("cublasLtMatrixLayoutCreate");
  if (ld < static_cast<int64_t>(rows))
    return fail("cublasLtMatrixLayoutCreate: ld " + std::to_string(ld) + " < rows " +
                std::to_string(rows)),
           kInvalidValue;
  *layout = new int(0);
  state().layouts[*layout] = FakeLtLayout{type, rows, cols, ld};
  return kOk;
}
int cublasLtMatrixLayoutDestroy(void *layout) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().layouts.erase(layout) == 0)
    return fail("cublasLtMatrixLayoutDestroy of an unknown layout"), kInvalidValue;
  delete static_cast<int *>(layout);
  return kOk;
}

int cublasLtMatmulPreferenceCreate(void **preference) {
  std::lock_guard<std::mutex> lock(state().mutex);
  noCapture("cublasLtMatmulPreferenceCreate");
  *preference = new int(0);
  state().preferences[*preference] = Preference();
  return kOk;
}
int cublasLtMatmulPreferenceDestroy(void *preference) {
  std::lock_guard<std::mutex> lock(state().mutex);
  if (state().preferences.erase(preference) == 0)
    return fail("cublasLtMatmulPreferenceDestroy of an unknown preference"), kInvalidValue;
  delete static_cast<int *>(preference);
  return kOk;
}
int cublasLtMatmulPreferenceSetAttribute(void *preference, int attribute, const void *value,
                                         size_t bytes) {
  std::lock_guard<std::mutex> lock(state().mutex);
  Preference *p = object(state().preferences, preference, "preference");
  if (p == nullptr)
    return kInvalidValue;
  if (attribute == 1)
    return setValue(p->maxWorkspace, value, bytes, "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES");
  if (attribute >= 5 && attribute <= 8)
    return setValue(p->alignment[attribute - 5], value, bytes,
                    "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT");
  fail("unexpected preference attribute " + std::to_string(attribute));
  return kInvalidValue;
}

// cublasLtMatmulHeuristicResult_t, as runtime/cuda/cublaslt.h declares it.
struct HeuristicResult {
  uint64_t algo[8];
  size_t workspaceSize;
  int state;
  float wavesCount;
  int reserved[4];
};

int cublasLtMatmulAlgoGetHeuristic(void *handle, void *desc, void *a, void *b, void *c, void *d,
                                   void *preference, int requested, HeuristicResult *results,
                                   int *returned) {
  std::lock_guard<std::mutex> lock(state().mutex);
  State &s = state();
  noCapture("cublasLtMatmulAlgoGetHeuristic");
  *returned = 0;
  Preference *p = object(s.preferences, preference, "preference");
  if (!s.handles.count(handle) || !object(s.descs, desc, "matmul descriptor") ||
      !object(s.layouts, a, "layout A") || !object(s.layouts, b, "layout B") ||
      !object(s.layouts, c, "layout C") || !object(s.layouts, d, "layout D") || p == nullptr ||
      requested < 1)
    return kInvalidValue;
  if (s.noAlgorithm || p->maxWorkspace < kAlgoWorkspace)
    return kNotSupported;
  std::memset(&results[0], 0, sizeof(results[0]));
  results[0].algo[0] = kAlgoTag;
  results[0].workspaceSize = kAlgoWorkspace;
  results[0].wavesCount = 1.0f;
  *returned = 1;
  return kOk;
}

int cublasLtMatmul(void *handle, void *desc, const void *alpha, const void *a, void *aLayout,
                   const void *b, void *bLayout, const void *beta, const void *c, void *cLayout,
                   void *d, void *dLayout, const uint64_t *algo, void *workspace,
                   size_t workspaceBytes, void *stream) {
  std::lock_guard<std::mutex> lock(state().mutex);
  State &s = state();
  Desc *desc_ = object(s.descs, desc, "matmul descriptor");
  FakeLtLayout *la = object(s.layouts, aLayout, "layout A");
  FakeLtLayout *lb = object(s.layouts, bLayout, "layout B");
  FakeLtLayout *lc = object(s.layouts, cLayout, "layout C");
  FakeLtLayout *ld = object(s.layouts, dLayout, "layout D");
  if (!s.handles.count(handle) || !desc_ || !la || !lb || !lc || !ld)
    return fail("cublasLtMatmul with an unknown handle or descriptor"), kInvalidValue;
  if (algo == nullptr || algo[0] != kAlgoTag)
    return fail("cublasLtMatmul with an algorithm the heuristic did not return"), kInvalidValue;
  if (workspaceBytes < kAlgoWorkspace)
    return fail("cublasLtMatmul: workspace smaller than the algorithm needs"), kInvalidValue;
  FakeLtMatmul m;
  m.a = *la, m.b = *lb, m.c = *lc, m.d = *ld;
  m.sameCdLayout = cLayout == dLayout;
  m.computeType = desc_->computeType, m.scaleType = desc_->scaleType;
  m.transA = desc_->transA, m.transB = desc_->transB;
  m.epilogue = desc_->epilogue, m.biasType = desc_->biasType, m.bias = desc_->bias;
  m.pa = a, m.pb = b, m.pc = c, m.pd = d;
  std::memcpy(&m.alpha, alpha, 4); // scale type f32
  std::memcpy(&m.beta, beta, 4);
  m.workspace = workspace, m.workspaceBytes = workspaceBytes;
  m.stream = stream;
  m.captured = capturing();
  // op(A) is rows x K, B is K x cols, C and D are rows x cols.
  uint64_t opRows = m.transA ? la->cols : la->rows, opK = m.transA ? la->rows : la->cols;
  uint64_t bK = m.transB ? lb->cols : lb->rows, bCols = m.transB ? lb->rows : lb->cols;
  if (opK != bK || ld->rows != opRows || ld->cols != bCols || lc->rows != ld->rows ||
      lc->cols != ld->cols)
    fail("cublasLtMatmul: inconsistent shapes");
  if (c == d && !m.sameCdLayout)
    fail("cublasLtMatmul in place (C == D) with different C and D layouts");
  checkInside(a, span(*la, 2), "A");
  checkInside(b, span(*lb, 2), "B");
  checkInside(c, span(*lc, 2), "C");
  checkInside(d, span(*ld, 2), "D");
  checkInside(workspace, workspaceBytes, "the workspace");
  if (m.epilogue == 4)
    checkInside(m.bias, ld->rows * (m.biasType == 0 ? 4 : 2), "the bias");
  if (s.error.empty())
    compute(m);
  s.matmuls.push_back(m);
  return kOk;
}

} // extern "C"
