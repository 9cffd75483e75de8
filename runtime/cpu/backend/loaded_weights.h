// The weights of a loaded plan as the CPU kernels see them: views into the
// mapped plan, copies of them on 2 MiB pages (see the end), or, for a
// --synthetic-weights plan, tensors generated once at load time from each
// tensor's SyntheticInit. The int4 zero points
// of the CPU programs' matrices are packed to 4 bits at load time (dtype U8,
// [rows, q4ZeroRowBytes(groups)]; cpu/matmul_q4.h), so that decode reads
// 18.5 instead of 20 bytes per group of 32 weights; a zero point that is not
// an integer 0..15 fails the load, naming its tensor. Where the int4
// kernels read 16-row panels (cpu/q4_panels.h: AVX-512 VNNI machines), each
// int4 matrix is also laid out in panels at load time, and the plan's
// row-major words, read by no kernel then, leave the process's memory
// (Plan::releasePages; a synthetic plan keeps its generated words). Where
// the bf16 kernels read coded rows (cpu/bf16_coded.h: AVX512-BF16 and
// VBMI), every plain bf16 matrix the CPU programs multiply by (the Linear
// steps' and the lm_head) is coded at load time in 12 bits a weight
// (WeightMatrix::coded) and its plan pages given back the same way. Every
// other tensor a Linear, Logits or LmHead step reads from the plan is
// copied onto 2 MiB pages (copyStreamedTensors), its plan pages given back.
#pragma once

#include "cpu/weights.h"
#include "plan/plan.h"
#include "support/thread_pool.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace llmc {

class LoadedWeights {
public:
  static Expected<LoadedWeights> load(const Plan &plan, ThreadPool &pool);
  // Whether load() copies the streamed tensors onto 2 MiB pages
  // (copyStreamedTensors): on unless LLMC_CPU_COPY_WEIGHTS=0 or a test said.
  static bool copiesWeights();
  static void setCopyWeightsForTesting(bool copy);
  // The weights of a plan whose tensors live elsewhere (Plan::fromMetadata):
  // data[i] holds tensor i's bytes in its dtype, for as long as the result.
  static Expected<LoadedWeights> fromViews(const Plan &plan, std::vector<const void *> data);
  // A view of these weights (owning nothing; valid while they are) with
  // tensor `index` read from `matrix` instead: same shape, a float dtype.
  struct Replacement {
    uint32_t index = 0;
    cpu::WeightMatrix matrix;
  };
  LoadedWeights replaced(const std::vector<Replacement> &replacements) const;
  size_t size() const { return data_.size(); }
  const std::vector<int64_t> &shape(uint32_t index) const { return shapes_[index]; }

  // Tensor `index` of the plan: its bytes and dtype.
  const void *data(uint32_t index) const { return data_[index]; }
  DType dtype(uint32_t index) const { return dtypes_[index]; }
  cpu::WeightMatrix matrix(uint32_t index) const;
  // The 16-row panels of the int4 matrix whose packed words are tensor
  // `index` (cpu::Q4Matrix::panels), or null.
  const uint8_t *q4Panels(uint32_t index) const { return q4Panels_[index]; }
  // Bytes of tensor `index`'s coded bf16 rows (cpu/bf16_coded.h), or 0.
  uint64_t codedBf16Bytes(uint32_t index) const;
  cpu::WeightVector vector(uint32_t index) const;
  // Bytes generated at load time: a synthetic plan's tensors and the packed
  // int4 zero points, panels and coded bf16 matrices.
  uint64_t generatedBytes() const { return generatedBytes_; }
  // Bytes of the plan's mapping given back at load (row-major int4 words
  // read as panels, bf16 matrices read coded).
  uint64_t releasedPlanBytes() const { return releasedPlanBytes_; }

private:
  // Replaces each int4 zeros tensor of the plan's CPU programs by its packed nibbles.
  Status packQ4Zeros(const Plan &plan, ThreadPool &pool);
  // Lays out the CPU programs' int4 matrices in panels where
  // cpu::q4PanelsFor(K) (VNNI, rows of at most 4096 columns); with
  // `release`, gives back the plan's pages of their row-major words.
  Status buildQ4Panels(const Plan &plan, ThreadPool &pool, bool release);
  // Codes the CPU programs' plain bf16 matrices where cpu::codedBf16Used()
  // and coding pays; with `release`, gives back the plan's pages of their bf16.
  Status codeBf16Matrices(const Plan &plan, ThreadPool &pool, bool release);
  // Copies the tensors the CPU programs' Linear, Logits and LmHead steps
  // stream from the plan's mapping each step (those read in place: not the
  // int4 words and scales read as panels, not the coded bf16 matrices) into
  // one buffer on 2 MiB pages, giving back the plan's pages as it goes.
  // Why: one Zen 4 core read f32 rows from the plan's 4 KiB file pages at
  // 17.5-22.5 GB/s and from the same bytes on 2 MiB pages at 23.2-28.7
  // (docs/perf.md, "Weights on 2 MiB pages"). Skipped (the weights read
  // in place) where the copies would take over half the host's usable
  // memory or cannot be allocated; off with LLMC_CPU_COPY_WEIGHTS=0.
  Status copyStreamedTensors(const Plan &plan, ThreadPool &pool);
  uint8_t *allocate(uint64_t bytes);
  // Frees `data` of `bytes` if allocate() made it (a synthetic tensor the
  // load replaced); views into the plan are left alone.
  void releaseGenerated(const void *data, uint64_t bytes);

  struct FreeAligned {
    void operator()(uint8_t *p) const;
  };
  std::vector<const void *> data_;
  std::vector<DType> dtypes_;
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<const uint8_t *> q4Panels_; // per tensor: its panels, or null
  std::vector<cpu::CodedBf16> codedBf16_; // per tensor: its coded rows, or none
  std::vector<std::unique_ptr<uint8_t, FreeAligned>> generated_;
  uint64_t generatedBytes_ = 0;
  uint64_t releasedPlanBytes_ = 0;
};

// Fills `count` elements of `out` (dtype F32, F16 or BF16) with values
// [first, first + count) of a synthetic tensor.
void fillSynthetic(const fb::SyntheticInit &init, DType dtype, uint64_t first, uint64_t count,
                   void *out);

// The Q4Weight / Q4Scales / Q4Zeros kinds: fills the (row, group) cells
// [firstCell, firstCell + cellCount) (cell = row * groups + group) of the
// whole tensor `out` (kernels/common/q4_rtn.h).
void fillSyntheticQ4(const fb::SyntheticInit &init, uint64_t firstCell, uint64_t cellCount,
                     void *out);

} // namespace llmc
