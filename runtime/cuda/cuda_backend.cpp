#include "cuda/cuda_backend.h"

#include "cpu/backend/loaded_weights.h"
#include "cuda/kernel_abi.h"
#include "engine/engine_options.h"
#include "kernels/common/q4_layout.h"
#include "kernels/common/sampling.h"
#include "plan/plan_format.h"
#include "support/dtype.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace llmc::cuda {
namespace {

constexpr uint32_t kDefaultSharedLimit = 48 * 1024; // above this a kernel must opt in
constexpr int64_t kInitialRows = 4096;              // arena rows reserved at load

std::string gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", bytes / double(uint64_t(1) << 30));
  return text;
}

const char *dtypeTag(fb::DType t) {
  switch (t) {
  case fb::DType::F32:
    return "f32";
  case fb::DType::F16:
    return "f16";
  case fb::DType::BF16:
    return "bf16";
  default:
    return "unsupported";
  }
}

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

} // namespace

Expected<std::unique_ptr<CudaBackend>> CudaBackend::create(const Plan &plan,
                                                           const EngineOptions &options) {
  std::unique_ptr<CudaBackend> b(new CudaBackend());
  b->plan_ = &plan;
  // Synchronizing after every step attributes a fault to its step; graphs
  // would hide the steps, so they are off then.
  const char *sync = std::getenv("LLMC_CUDA_SYNC");
  b->syncEachStep_ = sync != nullptr && std::strcmp(sync, "1") == 0;
  b->useGraphs_ = options.cudaGraphs && !b->syncEachStep_;
  LLMC_ASSIGN_OR_RETURN(b->device_, Device::open(options.cudaDevice));
  const DeviceInfo &info = b->device_->info();
  auto has = [&](fb::Target t) {
    return plan.module(t) != nullptr && plan.program(t, fb::Phase::Prefill) != nullptr &&
           plan.program(t, fb::Phase::Decode, 1) != nullptr;
  };
  b->target_ = pickTarget(info, has(fb::Target::Sm90a), has(fb::Target::Ptx));
  if (b->target_ == fb::Target::Cpu)
    return Status::error(
        plan.path() + ": no GPU code this device can run (" + info.name + ", compute capability " +
        std::to_string(info.major) + "." + std::to_string(info.minor) + "; the plan has " +
        (has(fb::Target::Sm90a) ? "sm_90a " : "") + (has(fb::Target::Ptx) ? "ptx " : "") +
        "GPU programs); rebuild it with llmc build --target cpu,sm_90a,ptx");
  const fb::ModelInfo &m = *plan.meta().model();
  b->blockSize_ = static_cast<int32_t>(plan.meta().kv_cache()->block_size());
  b->blockTableStride_ = ceilDiv(m.max_seq_len(), b->blockSize_);
  for (const fb::Program *p : *plan.meta().programs()) {
    if (p->target() != b->target_)
      continue;
    b->arenaBytesPerToken_ = std::max(b->arenaBytesPerToken_, p->arena_bytes_per_token());
    // A decode program's rows are its sequences, one each.
    const bool decode = p->phase() == fb::Phase::Decode;
    uint64_t &workspace = decode ? b->workspacePerSequence_ : b->workspacePerToken_;
    uint64_t &counters = decode ? b->countersPerSequence_ : b->countersPerToken_;
    for (const fb::Step *s : *p->steps()) {
      workspace = std::max(workspace, s->workspace_bytes_per_token());
      counters = std::max(counters, s->counters_per_token());
    }
  }
  LLMC_RETURN_IF_ERROR(b->checkDriverVersion());
  LLMC_RETURN_IF_ERROR(b->loadModule());
  LLMC_RETURN_IF_ERROR(b->uploadWeights());
  LLMC_RETURN_IF_ERROR(b->uploadWeightTables());
  // cuBLASLt's workspace before the KV cache takes what is left.
  LLMC_RETURN_IF_ERROR(b->openCublasLt(options));
  int64_t sequences = std::max<int64_t>(1, options.maxSequences);
  LLMC_RETURN_IF_ERROR(b->ensureCapacity(
      std::max<int64_t>(sequences, std::min(m.max_seq_len() * sequences, kInitialRows)),
      sequences));
  LLMC_RETURN_IF_ERROR(b->allocateKvCache(options));
  LLMC_RETURN_IF_ERROR(b->device_->synchronize());
  return b;
}

CudaBackend::~CudaBackend() {
  if (device_ != nullptr)
    (void)device_->synchronize();
  dropGraphs();
}

void CudaBackend::dropGraphs() {
  if (device_ != nullptr)
    for (auto &[key, exec] : graphs_)
      device_->api().graphExecDestroy(exec);
  graphs_.clear();
}

std::string CudaBackend::description() const {
  const DeviceInfo &info = device_->info();
  return "the CUDA backend on " + info.name + " (compute " + std::to_string(info.major) + "." +
         std::to_string(info.minor) + ", " + std::to_string(info.multiprocessors) + " SMs), " +
         (target_ == fb::Target::Sm90a ? "sm_90a cubin" : "PTX JIT-compiled by the driver") +
         ", KV cache " + std::to_string(blocks_->numBlocks()) + " blocks of " +
         std::to_string(blockSize_) + " tokens (" + gib(kv_.bytes()) + "), driver " +
         cudaVersionText(info.driverVersion) + "; " + cublasLtNote_ +
         (syncEachStep_ ? "; LLMC_CUDA_SYNC=1: synchronized after every step, no CUDA graphs"
                        : "");
}

// One line when the driver is older than what the module (cubin: the major
// version of the CUDA that compiled it; PTX: its ISA) needs.
Status CudaBackend::checkDriverVersion() {
  const fb::KernelModule &module = *plan_->module(target_);
  const int driver = device_->info().driverVersion;
  const int needed = moduleDriverVersion(target_, module.image()->data(), module.image()->size(),
                                         module.cuda_version());
  if (driver >= needed)
    return Status::ok();
  return Status::error(
      "the CUDA driver on this machine is " + cudaVersionText(driver) + ", older than the " +
      cudaVersionText(needed) + " that " + plan_->path() + "'s " +
      (target_ == fb::Target::Sm90a
           ? "sm_90a cubin (compiled by CUDA " + cudaVersionText(module.cuda_version()) + ")"
           : std::string("PTX (its ISA .version)")) +
      " needs: install an NVIDIA driver for CUDA " + cudaVersionText(needed) +
      " or newer, or run with --device cpu");
}

Status CudaBackend::openCublasLt(const EngineOptions &options) {
  bool wanted = false;
  for (const fb::Program *p : *plan_->meta().programs())
    if (p->target() == target_)
      for (const fb::Step *s : *p->steps())
        wanted |= s->library_gemm() != nullptr;
  if (!wanted) {
    cublasLtNote_ = "no GEMM of this plan suits cuBLASLt (plain bf16 Linear steps only)";
    return Status::ok();
  }
  if (!options.cublasLt) {
    cublasLtNote_ = "cuBLASLt turned off: every GEMM on llmc kernels";
    return Status::ok();
  }
  // Whatever keeps cuBLASLt from working leaves the plan's own kernels.
  if (device_->info().driverVersion < kCublasLtDriverVersion) {
    cublasLtNote_ = "cuBLASLt not used (libcublasLt.so.13 needs CUDA driver " +
                    cudaVersionText(kCublasLtDriverVersion) + ", this one is " +
                    cudaVersionText(device_->info().driverVersion) +
                    "): every GEMM on llmc kernels";
    return Status::ok();
  }
  auto library = CublasLt::load();
  if (!library) {
    cublasLtNote_ = "cuBLASLt not used (" + library.message() + "): every GEMM on llmc kernels";
    return Status::ok();
  }
  auto gemms = LtGemms::create(**library, *device_);
  if (!gemms) {
    cublasLtNote_ = "cuBLASLt not used (" + gemms.message() + "): every GEMM on llmc kernels";
    return Status::ok();
  }
  gemms_ = std::move(*gemms);
  cublasLtNote_ =
      "plain bf16 GEMMs on cuBLASLt " + (*library)->version() + " (" + (*library)->path() + ")";
  return Status::ok();
}

Status CudaBackend::loadModule() {
  const fb::KernelModule &module = *plan_->module(target_);
  LLMC_ASSIGN_OR_RETURN(module_, device_->loadModule(module.image()->data(), module.image()->size(),
                                                     plan_->path() + ": the " +
                                                         fb::EnumNameTarget(target_) + " module"));
  for (const auto *name : *module.functions()) {
    LLMC_ASSIGN_OR_RETURN(CUfunction f, module_.function(name->str()));
    functions_.push_back(f);
    if (name->str() == "llmc_argmax_f32")
      argmax_ = f;
    if (name->str() == abi::kTopKKernel)
      topK_ = f;
  }
  // Dynamic shared memory above 48 KiB must be opted into, per function.
  std::vector<uint32_t> shared(functions_.size(), 0);
  for (const fb::Program *p : *plan_->meta().programs())
    if (p->target() == target_)
      for (const fb::Step *s : *p->steps())
        shared[s->kernel()] = std::max(shared[s->kernel()], s->shared_bytes());
  const DriverApi &cu = device_->api();
  for (size_t k = 0; k < functions_.size(); ++k) {
    if (shared[k] <= kDefaultSharedLimit)
      continue;
    if (shared[k] > static_cast<uint32_t>(device_->info().maxSharedPerBlock))
      return Status::error(plan_->path() + ": kernel " + module.functions()->Get(k)->str() +
                           " needs " + std::to_string(shared[k]) +
                           " bytes of shared memory; this GPU allows " +
                           std::to_string(device_->info().maxSharedPerBlock));
    LLMC_CU(cu.funcSetAttribute(functions_[k], kFuncAttrMaxDynamicSharedSizeBytes,
                                static_cast<int>(shared[k])));
  }
  return Status::ok();
}

Status CudaBackend::uploadWeights() {
  const auto &tensors = *plan_->meta().tensors();
  tensors_.assign(tensors.size(), 0);
  if (!plan_->meta().synthetic()) {
    // The weight section as it is in the file: one allocation, one copy.
    LLMC_ASSIGN_OR_RETURN(weights_, device_->allocate(plan_->weightsSize()));
    LLMC_RETURN_IF_ERROR(
        device_->upload(weights_.get(), plan_->weightSection(), plan_->weightsSize()));
    for (uint32_t i = 0; i < tensors.size(); ++i)
      tensors_[i] = weights_.get() + tensors.Get(i)->offset();
    return Status::ok();
  }
  // Synthetic weights are generated on the device, as the CPU generates them.
  std::vector<uint64_t> offsets(tensors.size());
  uint64_t total = 0;
  for (uint32_t i = 0; i < tensors.size(); ++i) {
    offsets[i] = total = alignUp(total, kPlanWeightAlignment);
    total += tensors.Get(i)->size();
  }
  LLMC_ASSIGN_OR_RETURN(weights_, device_->allocate(total));
  const auto &names = *plan_->module(target_)->functions();
  for (uint32_t i = 0; i < tensors.size(); ++i) {
    const fb::Tensor &t = *tensors.Get(i);
    tensors_[i] = weights_.get() + offsets[i];
    const bool q4 = isSyntheticQ4(t.synthetic()->kind());
    std::string kernel = q4 ? abi::kSyntheticFillQ4Kernel
                            : std::string("llmc_synthetic_fill_") + dtypeTag(t.dtype());
    int index = -1;
    for (uint32_t f = 0; f < names.size(); ++f)
      if (names.Get(f)->str() == kernel)
        index = static_cast<int>(f);
    if (index < 0)
      return Status::error(plan_->path() + ": the module lacks " + kernel +
                           " to generate synthetic tensor '" + t.name()->str() + "'");
    abi::SyntheticFillArgs args{};
    args.out = reinterpret_cast<void *>(tensors_[i]);
    args.count = t.size() / dtypeSize(static_cast<DType>(t.dtype()));
    args.seed = t.synthetic()->seed();
    args.stddev = t.synthetic()->std();
    args.kind = static_cast<int>(t.synthetic()->kind());
    if (q4) { // one (row, group) cell per thread
      args.cols = t.synthetic()->cols();
      args.groupSize = t.synthetic()->group_size();
      args.count =
          static_cast<uint64_t>(t.shape()->Get(0) * hd::q4NumGroups(args.cols, args.groupSize));
    }
    uint32_t grid[3] = {static_cast<uint32_t>(std::min<uint64_t>(
                            ceilDiv(static_cast<int64_t>(args.count), 256),
                            static_cast<uint64_t>(device_->info().multiprocessors) * 16)),
                        1, 1};
    uint32_t block[3] = {256, 1, 1};
    LLMC_RETURN_IF_ERROR(device_->launch(functions_[index], grid, block, 0, &args));
  }
  return device_->synchronize();
}

// Every GPU step's weight addresses, in one device array: a step's
// StepArgs::w points at its slice (cuda/kernel_abi.h), so a kind takes as
// many weights as it has without a fixed number of slots in the arguments.
Status CudaBackend::uploadWeightTables() {
  std::vector<CUdeviceptr> table;
  std::vector<std::pair<const fb::Step *, size_t>> slices;
  for (const fb::Program *program : *plan_->meta().programs()) {
    if (program->target() != target_)
      continue;
    for (const fb::Step *step : *program->steps()) {
      if (step->weights() == nullptr || step->weights()->size() == 0)
        continue;
      slices.emplace_back(step, table.size());
      for (int32_t w : *step->weights()) // in range: the loader checked every index
        table.push_back(tensors_[static_cast<uint32_t>(w)]);
    }
  }
  stepWeights_.clear();
  if (table.empty())
    return Status::ok();
  const uint64_t bytes = table.size() * sizeof(CUdeviceptr);
  LLMC_ASSIGN_OR_RETURN(weightTables_, device_->allocate(bytes));
  LLMC_RETURN_IF_ERROR(device_->upload(weightTables_.get(), table.data(), bytes));
  for (const auto &[step, first] : slices)
    stepWeights_[step] = weightTables_.get() + first * sizeof(CUdeviceptr);
  return Status::ok();
}

Status CudaBackend::allocateKvCache(const EngineOptions &options) {
  const fb::ModelInfo &m = *plan_->meta().model();
  // The cache holds what attention reads: the dtype of its k input.
  fb::DType kvType = fb::DType::F32;
  for (const fb::Step *s : *plan_->program(target_, fb::Phase::Prefill)->steps())
    if (s->op() == fb::OpKind::Attention) {
      kvType =
          plan_->program(target_, fb::Phase::Prefill)->buffers()->Get(s->inputs()->Get(1))->dtype();
      break;
    }
  if (options.kvCacheDtype != "auto" && options.kvCacheDtype != dtypeTag(kvType))
    return Status::error("--kv-cache-dtype " + options.kvCacheDtype +
                         ": the GPU's KV cache holds " +
                         "what this plan's attention kernels read, " + dtypeTag(kvType) +
                         "; use auto (or " + dtypeTag(kvType) + ") on the GPU, or --device cpu");
  uint64_t perLayerBlock = static_cast<uint64_t>(blockSize_) * m.num_kv_heads() * m.head_dim() *
                           dtypeSize(static_cast<DType>(kvType));
  uint64_t perBlock = perLayerBlock * 2 * m.num_layers();
  uint64_t freeBytes = 0, totalBytes = 0;
  LLMC_RETURN_IF_ERROR(device_->memoryInfo(&freeBytes, &totalBytes));
  double fraction = options.gpuMemoryFraction;
  if (!(fraction > 0.0 && fraction <= 1.0))
    return Status::error("--gpu-memory-fraction " + std::to_string(fraction) +
                         " must be in (0, 1]");
  uint64_t budget = static_cast<uint64_t>(fraction * static_cast<double>(totalBytes));
  uint64_t used = totalBytes - freeBytes;
  int64_t fit = budget > used ? static_cast<int64_t>((budget - used) / perBlock) : 0;
  int64_t slots = options.kvCacheTokens > 0
                      ? options.kvCacheTokens
                      : m.max_seq_len() * std::max<int64_t>(1, options.maxSequences);
  int64_t wanted = ceilDiv(slots, blockSize_) + 1; // + the null block
  int64_t oneSequence = blockTableStride_ + 1;
  int64_t numBlocks = std::min(wanted, fit);
  if (numBlocks < std::min(wanted, oneSequence))
    return Status::error("--gpu-memory-fraction " + std::to_string(fraction) + " of " +
                         gib(totalBytes) + " leaves " + gib(budget > used ? budget - used : 0) +
                         " for the KV cache after " + gib(used) +
                         " in use; one sequence of max_seq_len " + std::to_string(m.max_seq_len()) +
                         " needs " + gib(perBlock * oneSequence) + " (raise the fraction)");
  numBlocks = std::min<int64_t>(numBlocks, INT32_MAX);
  kvLayerBytes_ = perLayerBlock * static_cast<uint64_t>(numBlocks);
  LLMC_ASSIGN_OR_RETURN(kv_, device_->allocate(kvLayerBytes_ * 2 * m.num_layers()));
  blocks_ = std::make_unique<kv::BlockPool>(static_cast<int32_t>(numBlocks));
  return Status::ok();
}

// All or nothing: the old buffers are freed first (the KV cache took the
// rest of the device), and the capacity stays 0 until every new buffer is
// there, so after a failed growth no later step launches on freed memory:
// the next one allocates again, for its own size.
Status CudaBackend::ensureCapacity(int64_t rows, int64_t sequences) {
  if (rows <= capacityRows_ && sequences <= capacitySequences_)
    return Status::ok();
  rows = std::max(rows, capacityRows_);
  sequences = std::max(sequences, capacitySequences_);
  LLMC_RETURN_IF_ERROR(device_->synchronize());
  dropGraphs(); // they hold the old addresses
  capacityRows_ = capacitySequences_ = 0;
  auto release = [&] {
    arena_ = DeviceBuffer();
    workspace_ = DeviceBuffer();
    counters_ = DeviceBuffer();
    metadata_ = DeviceBuffer();
    ids_ = DeviceBuffer();
    topKCandidates_ = DeviceBuffer();
  };
  release();
  Status allocated = allocateCapacity(rows, sequences);
  if (!allocated) {
    release();
    return allocated.withContext("growing the activations to " + std::to_string(rows) +
                                 " rows, " + std::to_string(sequences) + " sequences");
  }
  capacityRows_ = rows;
  capacitySequences_ = sequences;
  return Status::ok();
}

Status CudaBackend::allocateCapacity(int64_t rows, int64_t sequences) {
  LLMC_ASSIGN_OR_RETURN(arena_, device_->allocate(arenaBytesPerToken_ * rows));
  LLMC_ASSIGN_OR_RETURN(ids_, device_->allocate(rows * sizeof(int32_t)));
  // Top-k: scores f32 and ids i32 [rows, kTopKCapacity], then counts [rows].
  LLMC_ASSIGN_OR_RETURN(topKCandidates_, device_->allocate(rows * (2 * hd::kTopKCapacity + 1) * 4));
  LLMC_ASSIGN_OR_RETURN(workspace_, device_->allocate(workspaceBytes(rows, sequences)));
  uint64_t counterBytes = counterBytesFor(rows, sequences);
  LLMC_ASSIGN_OR_RETURN(counters_, device_->allocate(counterBytes));
  LLMC_RETURN_IF_ERROR(device_->zeroAsync(counters_.get(), counterBytes));
  if (errorFlag_.get() == 0) {
    LLMC_ASSIGN_OR_RETURN(errorFlag_, device_->allocate(256));
    LLMC_RETURN_IF_ERROR(device_->zeroAsync(errorFlag_.get(), 256));
  }
  // int32 metadata: positions, row -> sequence, per sequence first row and
  // rows, block tables, logit rows.
  offPositions_ = 0;
  offRowSequence_ = offPositions_ + rows;
  offSeqFirst_ = offRowSequence_ + rows;
  offSeqRows_ = offSeqFirst_ + sequences;
  offTables_ = offSeqRows_ + sequences;
  offLogitRows_ = offTables_ + sequences * blockTableStride_;
  uint64_t total = offLogitRows_ + rows;
  hostMetadata_.assign(total, 0);
  LLMC_ASSIGN_OR_RETURN(metadata_, device_->allocate(total * 4));
  return Status::ok();
}

uint64_t CudaBackend::workspaceBytes(int64_t rows, int64_t sequences) const {
  return std::max<uint64_t>({256, workspacePerToken_ * rows, workspacePerSequence_ * sequences});
}

uint64_t CudaBackend::counterBytesFor(int64_t rows, int64_t sequences) const {
  return std::max<uint64_t>(
      {256, countersPerToken_ * 4 * rows, countersPerSequence_ * 4 * sequences});
}

Status CudaBackend::writeMetadata(const StepInput &input, int64_t logitRows) {
  const int64_t rows = input.numTokens;
  int32_t *h = hostMetadata_.data();
  std::memcpy(h + offPositions_, input.positions, rows * 4);
  for (size_t s = 0; s < input.sequences.size(); ++s) {
    const StepSequence &seq = input.sequences[s];
    for (int64_t r = seq.firstRow; r < seq.firstRow + seq.numRows; ++r)
      h[offRowSequence_ + r] = static_cast<int32_t>(s);
    h[offSeqFirst_ + s] = static_cast<int32_t>(seq.firstRow);
    h[offSeqRows_ + s] = static_cast<int32_t>(seq.numRows);
    int64_t lastPosition = input.positions[seq.firstRow + seq.numRows - 1];
    int64_t used = lastPosition / blockSize_ + 1;
    int32_t *table = h + offTables_ + s * blockTableStride_;
    std::memcpy(table, seq.blockTable, used * 4);
    std::fill(table + used, table + blockTableStride_, 0); // the null block
  }
  for (int64_t r = 0; r < logitRows; ++r)
    h[offLogitRows_ + r] = static_cast<int32_t>(input.outputs[r].row);
  return device_->uploadAsync(metadata_.get(), h, hostMetadata_.size() * sizeof(int32_t));
}

CUdeviceptr CudaBackend::bufferAddress(const fb::Program &program, int index, int64_t rows) const {
  return arena_.get() + program.buffers()->Get(index)->offset_per_token() * rows;
}

LtGemmCall CudaBackend::libraryCall(const fb::Program &program, const fb::Step &step,
                                    int64_t rows) const {
  const fb::LibraryGemm &g = *step.library_gemm();
  LtGemmCall call;
  call.m = rows;
  call.n = g.n();
  call.k = g.k();
  call.lda = g.lda();
  call.ldb = g.ldb();
  call.ldc = g.ldc();
  call.alpha = g.alpha();
  call.beta = g.beta();
  call.w = tensors_[step.weights()->Get(0)];
  call.x = bufferAddress(program, step.inputs()->Get(0), rows);
  call.y = bufferAddress(program, step.outputs()->Get(0), rows); // the residual when beta = 1
  call.bias = g.bias() ? tensors_[step.weights()->Get(1)] : 0;
  return call;
}

Status CudaBackend::prepareLibraryGemms(const fb::Program &program, int64_t rows) {
  if (gemms_ == nullptr)
    return Status::ok();
  for (const fb::Step *step : *program.steps())
    if (step->library_gemm() != nullptr)
      LLMC_RETURN_IF_ERROR(gemms_->prepare(libraryCall(program, *step, rows)).status());
  return Status::ok();
}

Status CudaBackend::launchProgram(const fb::Program &program, int64_t rows, int64_t logitRows,
                                  int64_t sequences) {
  auto metadata = [&](uint64_t offset) {
    return reinterpret_cast<const int *>(metadata_.get() + offset * 4);
  };
  abi::StepArgs base{};
  base.positions = metadata(offPositions_);
  base.rowSequence = metadata(offRowSequence_);
  base.seqFirstRow = metadata(offSeqFirst_);
  base.seqNumRows = metadata(offSeqRows_);
  base.blockTables = metadata(offTables_);
  base.logitRows = metadata(offLogitRows_);
  base.workspace = reinterpret_cast<void *>(workspace_.get());
  base.counters = reinterpret_cast<int *>(counters_.get());
  base.errorFlag = reinterpret_cast<int *>(errorFlag_.get());
  base.rows = static_cast<int>(rows);
  base.blockTableStride = static_cast<int>(blockTableStride_);
  base.numLogitRows = static_cast<int>(logitRows);
  base.numSequences = static_cast<int>(sequences);
  for (uint32_t i = 0; i < program.steps()->size(); ++i) {
    const fb::Step &step = *program.steps()->Get(i);
    LLMC_RETURN_IF_ERROR(runStep(program, step, base, rows, logitRows));
    if (syncEachStep_)
      LLMC_RETURN_IF_ERROR(syncAfterStep(program, step, i));
  }
  return Status::ok();
}

Status CudaBackend::syncAfterStep(const fb::Program &program, const fb::Step &step,
                                  uint32_t index) {
  Status synced = device_->synchronize();
  if (synced)
    return synced;
  const bool library = gemms_ != nullptr && step.library_gemm() != nullptr;
  return Status::error(
      "LLMC_CUDA_SYNC: step " + std::to_string(index) + " of the " +
      fb::EnumNamePhase(program.phase()) + " program (max_tokens " +
      std::to_string(program.max_tokens()) + "), " + fb::EnumNameOpKind(step.op()) + ", " +
      (library ? std::string("cuBLASLt (else kernel ") : std::string("kernel ")) +
      plan_->module(target_)->functions()->Get(step.kernel())->str() + (library ? ")" : "") +
      ", failed: " + synced.message());
}

// One step: its GEMM on cuBLASLt when the plan allows it and the library has
// an algorithm, else its kernel with `base` completed by its operands.
Status CudaBackend::runStep(const fb::Program &program, const fb::Step &step,
                            const abi::StepArgs &base, int64_t rows, int64_t logitRows) {
  if (gemms_ != nullptr && step.library_gemm() != nullptr) {
    auto ran = gemms_->run(libraryCall(program, step, rows));
    if (!ran)
      return ran.status().withContext(std::string(fb::EnumNameOpKind(step.op())) +
                                      " step on cuBLASLt");
    if (*ran)
      return Status::ok();
  }
  abi::StepArgs args = base;
  auto bufferAt = [&](int index) {
    return reinterpret_cast<void *>(bufferAddress(program, index, rows));
  };
  for (uint32_t i = 0; i < step.inputs()->size(); ++i)
    args.in[i] = bufferAt(step.inputs()->Get(i));
  args.out = bufferAt(step.outputs()->Get(0));
  if (step.weights() != nullptr && step.weights()->size() > 0) {
    auto table = stepWeights_.find(&step);
    if (table == stepWeights_.end())
      return Status::error("internal: a step of another target's program");
    args.w = reinterpret_cast<const void *const *>(table->second);
    args.numWeights = static_cast<int>(step.weights()->size());
  }
  if (const fb::AttentionParams *attention = step.params_as_AttentionParams()) {
    uint64_t layer = static_cast<uint64_t>(attention->layer());
    args.kvKeys = reinterpret_cast<void *>(kv_.get() + (2 * layer) * kvLayerBytes_);
    args.kvValues = reinterpret_cast<void *>(kv_.get() + (2 * layer + 1) * kvLayerBytes_);
  }
  uint32_t grid[3], block[3];
  for (int d = 0; d < 3; ++d) {
    grid[d] = step.grid()->Get(d);
    block[d] = step.block()->Get(d);
  }
  if (step.grid_token_axis() != 0) {
    // Logits and LmHead compute only the requested rows.
    bool gathered = step.op() == fb::OpKind::Logits || step.op() == fb::OpKind::LmHead;
    int64_t stepRows = gathered ? logitRows : rows;
    grid[step.grid_token_axis() - 1] *=
        static_cast<uint32_t>(ceilDiv(stepRows, step.tokens_per_block()));
  }
  return device_->launch(functions_[step.kernel()], grid, block, step.shared_bytes(), &args)
      .withContext(std::string(fb::EnumNameOpKind(step.op())) + " step, kernel " +
                   plan_->module(target_)->functions()->Get(step.kernel())->str());
}

Status CudaBackend::runGraph(const fb::Program &program, int64_t rows) {
  const DriverApi &cu = device_->api();
  GraphKey key{&program, rows};
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    // cuBLASLt's descriptors and heuristics are made before the capture;
    // its calls are capture-safe with the fixed workspace.
    LLMC_RETURN_IF_ERROR(prepareLibraryGemms(program, rows));
    LLMC_CU(cu.streamBeginCapture(device_->stream(), kStreamCaptureModeThreadLocal));
    Status launched = launchProgram(program, rows, rows, rows); // decode: one row per sequence
    CUgraph graph = nullptr;
    // A failed launch invalidates the capture: its own error is the one to
    // report, not the CAPTURE_INVALIDATED that ending the capture returns.
    CUresult ended = cu.streamEndCapture(device_->stream(), &graph);
    if (!launched) {
      if (ended == kCudaSuccess && graph != nullptr)
        cu.graphDestroy(graph);
      return launched.withContext("capturing the CUDA graph of a decode step of " +
                                  std::to_string(rows) + " rows");
    }
    LLMC_RETURN_IF_ERROR(checkCall(ended, "cuStreamEndCapture", __FILE__, __LINE__));
    CUgraphExec exec = nullptr;
    Status instantiated =
        checkCall(cu.graphInstantiate(&exec, graph, 0), "cuGraphInstantiate", __FILE__, __LINE__);
    cu.graphDestroy(graph);
    LLMC_RETURN_IF_ERROR(instantiated);
    it = graphs_.emplace(key, exec).first;
  }
  LLMC_CU(cu.graphLaunch(it->second, device_->stream()));
  return Status::ok();
}

Expected<double> CudaBackend::memoryBandwidthGBs() {
  const DriverApi &cu = device_->api();
  const uint64_t bytes = uint64_t(1) << 30;
  LLMC_ASSIGN_OR_RETURN(DeviceBuffer a, device_->allocate(bytes));
  LLMC_ASSIGN_OR_RETURN(DeviceBuffer b, device_->allocate(bytes));
  LLMC_RETURN_IF_ERROR(device_->zeroAsync(a.get(), bytes));
  CUevent start = nullptr, stop = nullptr;
  LLMC_CU(cu.eventCreate(&start, 0));
  LLMC_CU(cu.eventCreate(&stop, 0));
  double best = 0.0;
  Status status = Status::ok();
  for (int trial = 0; trial < 5 && status; ++trial) {
    float ms = 0.0f;
    status =
        checkCall(cu.eventRecord(start, device_->stream()), "cuEventRecord", __FILE__, __LINE__);
    if (status)
      status = checkCall(cu.memcpyDtoDAsync(b.get(), a.get(), bytes, device_->stream()),
                         "cuMemcpyDtoDAsync", __FILE__, __LINE__);
    if (status)
      status =
          checkCall(cu.eventRecord(stop, device_->stream()), "cuEventRecord", __FILE__, __LINE__);
    if (status)
      status = checkCall(cu.eventSynchronize(stop), "cuEventSynchronize", __FILE__, __LINE__);
    if (status)
      status = checkCall(cu.eventElapsedTime(&ms, start, stop), "cuEventElapsedTime", __FILE__,
                         __LINE__);
    if (status && ms > 0.0f)
      best = std::max(best, 2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9);
  }
  cu.eventDestroy(start);
  cu.eventDestroy(stop);
  LLMC_RETURN_IF_ERROR(status);
  return best;
}

Status CudaBackend::run(const StepInput &input, StepOutput &out) {
  const int64_t rows = input.numTokens;
  if (rows <= 0)
    return Status::error("a step needs at least one token");
  if (input.outputs.empty())
    return Status::error("a step needs at least one output row");
  const int64_t sequences = static_cast<int64_t>(input.sequences.size());
  // The program computes the logits of the output rows, in their order.
  const int64_t logitRows = static_cast<int64_t>(input.outputs.size());
  const int64_t vocab = plan_->meta().model()->vocab_size();
  for (int64_t t = 0; t < rows; ++t)
    if (input.tokens[t] < 0 || input.tokens[t] >= vocab)
      return Status::error("embedding: token id " + std::to_string(input.tokens[t]) +
                           " at position " + std::to_string(t) + " is outside the vocabulary [0, " +
                           std::to_string(vocab) + ")");
  bool decode = true;
  for (const StepSequence &s : input.sequences)
    decode &= s.numRows == 1;
  const fb::Program *program = decode ? plan_->program(target_, fb::Phase::Decode, rows)
                                      : plan_->program(target_, fb::Phase::Prefill);
  LLMC_RETURN_IF_ERROR(ensureCapacity(rows, sequences));
  if (gemms_ != nullptr)
    gemms_->trim();
  LLMC_RETURN_IF_ERROR(writeMetadata(input, logitRows));
  const fb::Buffer &tokenBuffer = *program->buffers()->Get(program->token_buffer());
  LLMC_RETURN_IF_ERROR(device_->uploadAsync(arena_.get() + tokenBuffer.offset_per_token() * rows,
                                            input.tokens, rows * sizeof(int32_t)));
  if (decode && useGraphs_ && logitRows == rows)
    LLMC_RETURN_IF_ERROR(runGraph(*program, rows));
  else
    LLMC_RETURN_IF_ERROR(launchProgram(*program, rows, logitRows, sequences));
  const fb::Buffer &logitsBuffer = *program->buffers()->Get(program->logits_buffer());
  CUdeviceptr deviceLogits = arena_.get() + logitsBuffer.offset_per_token() * rows;
  // Each row's own output: one argmax launch over the rows when any row
  // wants ids, one top-k launch per distinct (k, temperature), and the
  // logits downloaded only when a row needs them (a Logits row, a kind
  // without its kernel, or a top-k row whose ties overflowed).
  bool anyArgmax = false, needLogits = false;
  std::vector<std::pair<int32_t, float>> topKGroups;
  for (const OutputRequest &o : input.outputs) {
    if (o.kind == OutputKind::Argmax && argmax_ != nullptr) {
      anyArgmax = true;
    } else if (o.kind == OutputKind::TopK && topK_ != nullptr) {
      std::pair<int32_t, float> group{o.k, o.temperature};
      if (std::find(topKGroups.begin(), topKGroups.end(), group) == topKGroups.end())
        topKGroups.push_back(group);
    } else {
      needLogits = true;
    }
  }
  auto downloadLogits = [&] {
    logits_.resize(static_cast<size_t>(logitRows * vocab));
    return device_->downloadAsync(logits_.data(), deviceLogits, logits_.size() * sizeof(float));
  };
  if (anyArgmax) { // R ids instead of R x V logits
    abi::ArgmaxArgs args{reinterpret_cast<const float *>(deviceLogits),
                         reinterpret_cast<int *>(ids_.get()), static_cast<int>(logitRows),
                         static_cast<int>(vocab)};
    uint32_t grid[3] = {static_cast<uint32_t>(logitRows), 1, 1}, block[3] = {1024, 1, 1};
    LLMC_RETURN_IF_ERROR(device_->launch(argmax_, grid, block, 0, &args));
    LLMC_RETURN_IF_ERROR(
        device_->downloadAsync(out.ids.data(), ids_.get(), logitRows * sizeof(int32_t)));
  }
  // The first group's candidates land in `out`; later groups' in staging,
  // copied row by row after the synchronization.
  const size_t candidates = static_cast<size_t>(logitRows) * hd::kTopKCapacity;
  std::vector<float> stagedScores((topKGroups.size() > 1 ? topKGroups.size() - 1 : 0) * candidates);
  std::vector<int32_t> stagedIds(stagedScores.size());
  std::vector<int32_t> stagedCounts((topKGroups.size() > 1 ? topKGroups.size() - 1 : 0) *
                                    logitRows);
  for (size_t g = 0; g < topKGroups.size(); ++g)
    LLMC_RETURN_IF_ERROR(
        runTopK(topKGroups[g].first, topKGroups[g].second, deviceLogits, logitRows, vocab,
                g == 0 ? out.scores.data() : stagedScores.data() + (g - 1) * candidates,
                g == 0 ? out.candidates.data() : stagedIds.data() + (g - 1) * candidates,
                g == 0 ? out.counts.data() : stagedCounts.data() + (g - 1) * logitRows));
  if (needLogits)
    LLMC_RETURN_IF_ERROR(downloadLogits());
  int32_t flag = 0;
  LLMC_RETURN_IF_ERROR(device_->downloadAsync(&flag, errorFlag_.get(), sizeof(flag)));
  LLMC_RETURN_IF_ERROR(device_->synchronize());
  if (flag != abi::kErrorNone) {
    LLMC_RETURN_IF_ERROR(device_->zeroAsync(errorFlag_.get(), sizeof(flag)));
    return Status::error("a CUDA kernel reported bad input (error code " + std::to_string(flag) +
                         ")");
  }
  bool overflow = false;
  for (int64_t r = 0; r < logitRows; ++r) {
    const OutputRequest &o = input.outputs[r];
    if (o.kind == OutputKind::Argmax && argmax_ != nullptr) {
      out.filled[r] = OutputKind::Argmax;
    } else if (o.kind == OutputKind::TopK && topK_ != nullptr) {
      const size_t g = std::find(topKGroups.begin(), topKGroups.end(),
                                 std::pair<int32_t, float>{o.k, o.temperature}) -
                       topKGroups.begin();
      if (g > 0) {
        const size_t from = (g - 1) * candidates + r * hd::kTopKCapacity;
        std::copy_n(stagedScores.data() + from, hd::kTopKCapacity,
                    out.scores.data() + r * hd::kTopKCapacity);
        std::copy_n(stagedIds.data() + from, hd::kTopKCapacity,
                    out.candidates.data() + r * hd::kTopKCapacity);
        out.counts[r] = stagedCounts[(g - 1) * logitRows + r];
      }
      out.filled[r] = OutputKind::TopK;
      overflow |= out.counts[r] > hd::kTopKCapacity;
    } else {
      out.filled[r] = OutputKind::Logits;
    }
  }
  if (overflow && !needLogits) {
    LLMC_RETURN_IF_ERROR(downloadLogits());
    LLMC_RETURN_IF_ERROR(device_->synchronize());
  }
  if (needLogits || overflow) {
    out.logits = logits_.data();
    for (int64_t r = 0; r < logitRows; ++r)
      out.logitIndex[r] = r;
  }
  return Status::ok();
}

Status CudaBackend::runTopK(int32_t k, float temperature, CUdeviceptr deviceLogits, int64_t rows,
                            int64_t vocab, float *hostScores, int32_t *hostIds,
                            int32_t *hostCounts) {
  const uint64_t candidates = static_cast<uint64_t>(rows) * hd::kTopKCapacity;
  const CUdeviceptr scores = topKCandidates_.get(), ids = scores + candidates * 4,
                    counts = ids + candidates * 4;
  abi::TopKArgs args{reinterpret_cast<const float *>(deviceLogits),
                     reinterpret_cast<float *>(scores),
                     reinterpret_cast<int *>(ids),
                     reinterpret_cast<int *>(counts),
                     static_cast<int>(rows),
                     static_cast<int>(vocab),
                     k,
                     temperature};
  uint32_t grid[3] = {static_cast<uint32_t>(rows), 1, 1}, block[3] = {1024, 1, 1};
  LLMC_RETURN_IF_ERROR(device_->launch(topK_, grid, block, 0, &args));
  LLMC_RETURN_IF_ERROR(device_->downloadAsync(hostScores, scores, candidates * 4));
  LLMC_RETURN_IF_ERROR(device_->downloadAsync(hostIds, ids, candidates * 4));
  return device_->downloadAsync(hostCounts, counts, rows * 4);
}

} // namespace llmc::cuda
