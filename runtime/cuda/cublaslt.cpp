#include "cuda/cublaslt.h"

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <mutex>
#include <vector>

namespace llmc::cuda {
namespace {

template <typename Fn>
bool resolve(void *library, Fn &slot, const char *name, std::string &missing) {
  if (void *symbol = dlsym(library, name)) {
    slot = reinterpret_cast<Fn>(symbol);
    return true;
  }
  missing = name;
  return false;
}

Status resolveAll(void *library, const std::string &path, CublasLtApi &a) {
  std::string missing;
  bool ok =
      resolve(library, a.create, "cublasLtCreate", missing) &&
      resolve(library, a.destroy, "cublasLtDestroy", missing) &&
      resolve(library, a.getVersion, "cublasLtGetVersion", missing) &&
      resolve(library, a.matmulDescCreate, "cublasLtMatmulDescCreate", missing) &&
      resolve(library, a.matmulDescDestroy, "cublasLtMatmulDescDestroy", missing) &&
      resolve(library, a.matmulDescSetAttribute, "cublasLtMatmulDescSetAttribute", missing) &&
      resolve(library, a.matrixLayoutCreate, "cublasLtMatrixLayoutCreate", missing) &&
      resolve(library, a.matrixLayoutDestroy, "cublasLtMatrixLayoutDestroy", missing) &&
      resolve(library, a.matmulPreferenceCreate, "cublasLtMatmulPreferenceCreate", missing) &&
      resolve(library, a.matmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy", missing) &&
      resolve(library, a.matmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute",
              missing) &&
      resolve(library, a.matmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic", missing) &&
      resolve(library, a.matmul, "cublasLtMatmul", missing);
  if (!ok)
    return Status::error(path + " lacks " + missing + " (cuBLASLt 11 or newer is needed)");
  return Status::ok();
}

const char *statusName(CublasStatus status) {
  switch (status) {
  case 0:
    return "CUBLAS_STATUS_SUCCESS";
  case 1:
    return "CUBLAS_STATUS_NOT_INITIALIZED";
  case 3:
    return "CUBLAS_STATUS_ALLOC_FAILED";
  case 7:
    return "CUBLAS_STATUS_INVALID_VALUE";
  case 8:
    return "CUBLAS_STATUS_ARCH_MISMATCH";
  case 11:
    return "CUBLAS_STATUS_MAPPING_ERROR";
  case 13:
    return "CUBLAS_STATUS_EXECUTION_FAILED";
  case 14:
    return "CUBLAS_STATUS_INTERNAL_ERROR";
  case 15:
    return "CUBLAS_STATUS_NOT_SUPPORTED";
  case 16:
    return "CUBLAS_STATUS_LICENSE_ERROR";
  default:
    return "unknown cuBLAS status";
  }
}

// The largest power of two up to 256 that divides `address`: the pointer
// alignment the heuristic may assume (its default is 256).
int64_t alignmentOf(CUdeviceptr address) {
  int64_t alignment = 256;
  while (alignment > 1 && address % static_cast<uint64_t>(alignment) != 0)
    alignment /= 2;
  return alignment;
}

void *pointer(CUdeviceptr address) { return reinterpret_cast<void *>(address); }

} // namespace

// Opens the first of `names` that loads and resolves its entry points; a
// failure to open reports the first name's error.
Expected<const CublasLt *> CublasLt::open(const std::vector<std::string> &names) {
  std::string firstError;
  for (const std::string &name : names) {
    void *library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      const char *why = dlerror();
      if (firstError.empty())
        firstError = why ? why : name;
      continue;
    }
    auto lt = std::unique_ptr<CublasLt>(new CublasLt());
    lt->path_ = name;
    LLMC_RETURN_IF_ERROR(resolveAll(library, name, lt->api_));
    return static_cast<const CublasLt *>(lt.release()); // process lifetime, never closed
  }
  return Status::error("cannot open cuBLASLt: " + firstError);
}

Expected<const CublasLt *> CublasLt::load() {
  static std::mutex mutex;
  static std::map<std::string, Expected<const CublasLt *>> loaded; // by $LLMC_LIBCUBLASLT
  const char *override = std::getenv("LLMC_LIBCUBLASLT");
  const std::string key = override != nullptr ? override : "";
  std::lock_guard<std::mutex> lock(mutex);
  auto it = loaded.find(key);
  if (it == loaded.end()) // an explicit library is the only one tried
    it = loaded
             .emplace(key, open(key.empty() ? std::vector<std::string>{"libcublasLt.so.13",
                                                                       "libcublasLt.so"}
                                            : std::vector<std::string>{key}))
             .first;
  return it->second;
}

std::string CublasLt::version() const {
  size_t v = api_.getVersion();
  return std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." +
         std::to_string(v % 100);
}

Status checkLtCall(CublasStatus status, const char *call, const char *file, int line) {
  if (status == kCublasSuccess)
    return Status::ok();
  const char *base = std::strstr(file, "runtime/");
  return Status::error(std::string("cuBLASLt call ") + call + " failed: " + statusName(status) +
                       " (" + std::to_string(status) + ") at " + (base ? base : file) + ":" +
                       std::to_string(line));
}

Expected<std::unique_ptr<LtGemms>> LtGemms::create(const CublasLt &library, Device &device) {
  std::unique_ptr<LtGemms> gemms(new LtGemms(library, device));
  LLMC_CUBLASLT(library.api().create(&gemms->handle_));
  LLMC_ASSIGN_OR_RETURN(gemms->workspace_, device.allocate(kWorkspaceBytes));
  return gemms;
}

LtGemms::~LtGemms() {
  for (auto &[key, plan] : plans_)
    destroy(plan);
  if (handle_ != nullptr)
    library_->api().destroy(handle_);
}

void LtGemms::destroy(Plan &plan) {
  const CublasLtApi &lt = library_->api();
  for (LtMatrixLayout layout : {plan.a, plan.b, plan.cd})
    if (layout != nullptr)
      lt.matrixLayoutDestroy(layout);
  if (plan.desc != nullptr)
    lt.matmulDescDestroy(plan.desc);
  plan = Plan();
}

void LtGemms::trim() {
  if (plans_.size() <= kMaxCachedShapes)
    return;
  for (auto &[key, plan] : plans_)
    destroy(plan);
  plans_.clear();
}

Status LtGemms::createPlan(const LtGemmCall &c, Plan &p) {
  const CublasLtApi &lt = library_->api();
  // Column-major: D[N, M] = W^T (W stored K x N) * X^T (K x M) + beta * C.
  LLMC_CUBLASLT(lt.matmulDescCreate(&p.desc, kCublasComputeF32, kCudaR32F));
  const int32_t transA = kCublasOpT, transB = kCublasOpN;
  LLMC_CUBLASLT(lt.matmulDescSetAttribute(p.desc, kLtDescTransA, &transA, sizeof(transA)));
  LLMC_CUBLASLT(lt.matmulDescSetAttribute(p.desc, kLtDescTransB, &transB, sizeof(transB)));
  const uint32_t epilogue = c.bias != 0 ? kLtEpilogueBias : kLtEpilogueDefault;
  LLMC_CUBLASLT(lt.matmulDescSetAttribute(p.desc, kLtDescEpilogue, &epilogue, sizeof(epilogue)));
  if (c.bias != 0) {
    // The heuristic reads the pointer's alignment; run() sets each call's.
    const int32_t biasType = kCudaR32F;
    const void *bias = pointer(c.bias);
    LLMC_CUBLASLT(
        lt.matmulDescSetAttribute(p.desc, kLtDescBiasDataType, &biasType, sizeof(biasType)));
    LLMC_CUBLASLT(lt.matmulDescSetAttribute(p.desc, kLtDescBiasPointer, &bias, sizeof(bias)));
  }
  LLMC_CUBLASLT(lt.matrixLayoutCreate(&p.a, kCudaR16BF, c.k, c.n, c.lda));
  LLMC_CUBLASLT(lt.matrixLayoutCreate(&p.b, kCudaR16BF, c.k, c.m, c.ldb));
  LLMC_CUBLASLT(lt.matrixLayoutCreate(&p.cd, kCudaR16BF, c.n, c.m, c.ldc));

  LtMatmulPreference preference = nullptr;
  LLMC_CUBLASLT(lt.matmulPreferenceCreate(&preference));
  const uint64_t workspaceBytes = kWorkspaceBytes;
  const uint32_t alignments[4] = {
      static_cast<uint32_t>(alignmentOf(c.w)), static_cast<uint32_t>(alignmentOf(c.x)),
      static_cast<uint32_t>(alignmentOf(c.y)), static_cast<uint32_t>(alignmentOf(c.y))};
  const int alignmentAttributes[4] = {kLtPrefMinAlignmentA, kLtPrefMinAlignmentB,
                                      kLtPrefMinAlignmentC, kLtPrefMinAlignmentD};
  Status status =
      checkLtCall(lt.matmulPreferenceSetAttribute(preference, kLtPrefMaxWorkspaceBytes,
                                                  &workspaceBytes, sizeof(workspaceBytes)),
                  "cublasLtMatmulPreferenceSetAttribute", __FILE__, __LINE__);
  for (int i = 0; i < 4 && status; ++i)
    status = checkLtCall(lt.matmulPreferenceSetAttribute(preference, alignmentAttributes[i],
                                                         &alignments[i], sizeof(alignments[i])),
                         "cublasLtMatmulPreferenceSetAttribute", __FILE__, __LINE__);
  LtHeuristicResult result{};
  int returned = 0;
  CublasStatus heuristic = kCublasSuccess;
  if (status)
    heuristic = lt.matmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.cd, p.cd, preference, 1,
                                          &result, &returned);
  lt.matmulPreferenceDestroy(preference);
  LLMC_RETURN_IF_ERROR(status);
  // No algorithm for this shape is not an error: the step's kernel runs it.
  if (heuristic == kCublasNotSupported)
    return Status::ok();
  LLMC_RETURN_IF_ERROR(
      checkLtCall(heuristic, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__));
  p.found =
      returned > 0 && result.state == kCublasSuccess && result.workspaceSize <= workspaceBytes;
  p.algo = result.algo;
  return Status::ok();
}

Expected<const LtGemms::Plan *> LtGemms::plan(const LtGemmCall &c) {
  uint32_t betaBits = 0;
  std::memcpy(&betaBits, &c.beta, sizeof(betaBits));
  const Key key = {c.m,
                   c.n,
                   c.k,
                   c.lda,
                   c.ldb,
                   c.ldc,
                   betaBits,
                   c.bias != 0 ? alignmentOf(c.bias) : 0,
                   alignmentOf(c.w),
                   alignmentOf(c.x),
                   alignmentOf(c.y)};
  auto it = plans_.find(key);
  if (it != plans_.end())
    return &it->second;
  Plan created;
  Status status = createPlan(c, created);
  if (!status) {
    destroy(created);
    return status.withContext("cuBLASLt GEMM [" + std::to_string(c.m) + ", " + std::to_string(c.k) +
                              "] x [" + std::to_string(c.n) + ", " + std::to_string(c.k) + "]^T");
  }
  return &plans_.emplace(key, created).first->second;
}

Expected<bool> LtGemms::prepare(const LtGemmCall &call) {
  LLMC_ASSIGN_OR_RETURN(const Plan *p, plan(call));
  return p->found;
}

Expected<bool> LtGemms::run(const LtGemmCall &c) {
  LLMC_ASSIGN_OR_RETURN(const Plan *p, plan(c));
  if (!p->found)
    return false;
  const CublasLtApi &lt = library_->api();
  if (c.bias != 0) {
    const void *bias = pointer(c.bias);
    LLMC_CUBLASLT(lt.matmulDescSetAttribute(p->desc, kLtDescBiasPointer, &bias, sizeof(bias)));
  }
  // Host scalars, read at the call (also when a graph captures it): alpha
  // is no part of the cached plan, the heuristic does not depend on it.
  const float alpha = c.alpha, beta = c.beta;
  LLMC_CUBLASLT(lt.matmul(handle_, p->desc, &alpha, pointer(c.w), p->a, pointer(c.x), p->b, &beta,
                          pointer(c.y), p->cd, pointer(c.y), p->cd, &p->algo,
                          pointer(workspace_.get()), kWorkspaceBytes, device_->stream()));
  return true;
}

} // namespace llmc::cuda
