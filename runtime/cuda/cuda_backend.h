// The CUDA backend: runs a plan's GPU programs (sm_90a cubin on Hopper, the
// portable PTX elsewhere) on one GPU through the dlopen'ed driver.
//
// At load: the module of the chosen target; the weights in one device
// allocation (the plan's weight section with one copy, or generated on the
// device by the synthetic-fill kernels); the KV block pool, sized from
// EngineOptions::gpuMemoryFraction; the activation arena, scratch and the
// per-step metadata (positions, sequences, block tables) for a capacity of
// rows that grows on demand.
//
// A step: the metadata in one upload, then every step of the program that
// fits (decode programs specialized for T <= 1..16, else the any-T ones),
// launched on one stream with one StepArgs each (cuda/kernel_abi.h; the
// weights' addresses of every step in one device array written at load); decode
// steps are captured once per (program, T) as a CUDA graph and replayed.
// The logits rows come back with one download.
//
// Plain bf16 Linear steps of the programs for any T (engine.fbs,
// LibraryGemm) run on cuBLASLt when it loads (cuda/cublaslt.h) and has an
// algorithm for the shape; otherwise, or with EngineOptions::cublasLt off,
// they launch their own kernels. description() says which, and why.
#pragma once

#include "cuda/cublaslt.h"
#include "cuda/device.h"
#include "cuda/kernel_abi.h"
#include "engine/backend.h"

#include <map>
#include <unordered_map>

namespace llmc::cuda {

class CudaBackend : public Backend {
public:
  static Expected<std::unique_ptr<CudaBackend>> create(const Plan &plan,
                                                       const EngineOptions &options);
  ~CudaBackend() override;

  std::string description() const override;
  kv::BlockPool &blockPool() override { return *blocks_; }
  int32_t blockSize() const override { return blockSize_; }
  int threads() const override { return 0; }
  uint64_t kvCacheBytes() const override { return kv_.bytes(); }
  uint64_t generatedWeightBytes() const override { return 0; } // generated on the device
  // Copies 1 GiB device to device a few times; (read + written bytes) / best time.
  Expected<double> memoryBandwidthGBs() override;
  Status run(const StepInput &input, StepOutput &out) override;

  fb::Target target() const { return target_; }
  const DeviceInfo &device() const { return device_->info(); }
  int64_t graphsCaptured() const { return static_cast<int64_t>(graphs_.size()); }
  // Whether library GEMM steps run on cuBLASLt; cublasLtNote() says why not.
  bool usesCublasLt() const { return gemms_ != nullptr; }
  const std::string &cublasLtNote() const { return cublasLtNote_; }
  // Scratch and zeroed counters for a capacity of rows and sequences.
  uint64_t workspaceBytes(int64_t rows, int64_t sequences) const;
  uint64_t counterBytesFor(int64_t rows, int64_t sequences) const;

private:
  CudaBackend() = default;

  Status loadModule();
  Status uploadWeights();
  Status uploadWeightTables();
  Status allocateKvCache(const EngineOptions &options);
  Status checkDriverVersion();
  Status openCublasLt(const EngineOptions &options);
  Status ensureCapacity(int64_t rows, int64_t sequences);
  Status allocateCapacity(int64_t rows, int64_t sequences);
  Status writeMetadata(const StepInput &input, int64_t logitRows);
  Status launchProgram(const fb::Program &program, int64_t rows, int64_t logitRows,
                       int64_t sequences);
  // LLMC_CUDA_SYNC=1: waits for step `index` and names it when it failed.
  Status syncAfterStep(const fb::Program &program, const fb::Step &step, uint32_t index);
  Status runStep(const fb::Program &program, const fb::Step &step, const abi::StepArgs &base,
                 int64_t rows, int64_t logitRows);
  CUdeviceptr bufferAddress(const fb::Program &program, int index, int64_t rows) const;
  LtGemmCall libraryCall(const fb::Program &program, const fb::Step &step, int64_t rows) const;
  // Creates the cuBLASLt descriptors of a program's steps for `rows` (host
  // work, before a graph capture).
  Status prepareLibraryGemms(const fb::Program &program, int64_t rows);
  Status runGraph(const fb::Program &program, int64_t rows);
  // Launches llmc_topk_f32 on the logits rows at (k, temperature) and
  // queues the download of the candidates to the host (the caller
  // synchronizes).
  Status runTopK(int32_t k, float temperature, CUdeviceptr deviceLogits, int64_t rows,
                 int64_t vocab, float *hostScores, int32_t *hostIds, int32_t *hostCounts);

  const Plan *plan_ = nullptr;
  std::unique_ptr<Device> device_;
  std::unique_ptr<LtGemms> gemms_; // null: library GEMM steps launch their kernels
  std::string cublasLtNote_;       // for description(): cuBLASLt used, or why not
  fb::Target target_ = fb::Target::Cpu;
  Module module_;
  std::vector<CUfunction> functions_; // module functions, by index
  CUfunction argmax_ = nullptr;       // llmc_argmax_f32: greedy ids on the device
  CUfunction topK_ = nullptr;         // llmc_topk_f32: sampling candidates on the device
  DeviceBuffer weights_;
  std::vector<CUdeviceptr> tensors_; // device address of each plan tensor
  DeviceBuffer weightTables_;        // every step's weight addresses (StepArgs::w)
  std::unordered_map<const fb::Step *, CUdeviceptr> stepWeights_; // a step's slice of them
  DeviceBuffer kv_;                  // [layers][K, V][numBlocks * blockSize * kvHeads * headDim]
  uint64_t kvLayerBytes_ = 0;        // one of K or V of one layer
  std::unique_ptr<kv::BlockPool> blocks_;
  int32_t blockSize_ = 16;
  int64_t blockTableStride_ = 0; // max blocks per sequence
  bool useGraphs_ = true;
  bool syncEachStep_ = false; // $LLMC_CUDA_SYNC=1: synchronize and check after every step

  // Sized for capacityRows_ rows / capacitySequences_ sequences; both 0
  // while no complete set is allocated (after a failed growth).
  int64_t capacityRows_ = 0, capacitySequences_ = 0;
  uint64_t arenaBytesPerToken_ = 0;
  // Scratch and counters: per row for the prefill programs, per sequence
  // for the decode ones (one row per sequence): the flash-decoding partials
  // of 32 heads x 32 splits x 130 floats must not be reserved for every
  // prefill row.
  uint64_t workspacePerToken_ = 0, countersPerToken_ = 0;
  uint64_t workspacePerSequence_ = 0, countersPerSequence_ = 0;
  DeviceBuffer arena_, workspace_, counters_, metadata_, errorFlag_, ids_;
  DeviceBuffer topKCandidates_;       // top-k scores, ids [rows, kTopKCapacity], counts [rows]
  std::vector<int32_t> hostMetadata_; // staged, then uploaded with one copy
  uint64_t offPositions_ = 0, offRowSequence_ = 0, offSeqFirst_ = 0, offSeqRows_ = 0,
           offTables_ = 0, offLogitRows_ = 0; // int32 offsets into the metadata buffer
  std::vector<float> logits_;                 // host [R, V]

  struct GraphKey {
    const fb::Program *program;
    int64_t rows;
    bool operator<(const GraphKey &o) const {
      return program != o.program ? program < o.program : rows < o.rows;
    }
  };
  std::map<GraphKey, CUgraphExec> graphs_;
  void dropGraphs();
};

} // namespace llmc::cuda
