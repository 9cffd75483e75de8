#include "cpu/backend/loaded_weights.h"

#include "cpu/bf16_coded.h"
#include "cpu/matmul_q4.h"
#include "cpu/q4_panels.h"
#include "kernels/common/half.h"
#include "kernels/common/q4_rtn.h"
#include "ops/operands.h"
#include "plan/plan_format.h"
#include "plan/synthetic_float.h"
#include "support/env.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/mman.h>

namespace llmc {

void LoadedWeights::FreeAligned::operator()(uint8_t *p) const { std::free(p); }

void fillSynthetic(const fb::SyntheticInit &init, DType dtype, uint64_t first, uint64_t count,
                   void *out) {
  for (uint64_t i = 0; i < count; ++i) {
    const float value = syntheticFloat(init.kind(), init.std(), init.seed(), first + i);
    switch (dtype) {
    case DType::F16:
      static_cast<uint16_t *>(out)[i] = hd::f32ToF16(value);
      break;
    case DType::BF16:
      static_cast<uint16_t *>(out)[i] = hd::f32ToBf16(value);
      break;
    default:
      static_cast<float *>(out)[i] = value;
      break;
    }
  }
}

void fillSyntheticQ4(const fb::SyntheticInit &init, uint64_t firstCell, uint64_t cellCount,
                     void *out) {
  const hd::SyntheticQ4 q4{init.seed(), init.std(), init.cols(), init.group_size()};
  const int64_t groups = hd::q4NumGroups(q4.cols, q4.groupSize);
  const int64_t wordsPerRow = hd::q4WordsPerRow(q4.cols);
  for (uint64_t cell = firstCell; cell < firstCell + cellCount; ++cell) {
    const int64_t row = static_cast<int64_t>(cell) / groups,
                  g = static_cast<int64_t>(cell) % groups;
    const hd::Q4Code code = q4.code(row, g);
    switch (init.kind()) {
    case fb::SyntheticKind::Q4Weight:
      q4.writeGroupWords(row, g, code, static_cast<uint32_t *>(out) + row * wordsPerRow);
      break;
    case fb::SyntheticKind::Q4Scales:
      static_cast<uint16_t *>(out)[cell] = code.scale;
      break;
    default: // Q4Zeros
      static_cast<uint16_t *>(out)[cell] = code.zero;
      break;
    }
  }
}

uint8_t *LoadedWeights::allocate(uint64_t bytes) {
  // Buffers of 2 MiB or more on 2 MiB pages where the kernel allows
  // (transparent huge pages, "madvise" mode included): a decode step
  // streams every weight once, and on 4 KiB pages the int4 panels decoded
  // 4% slower than the plan's mapping they replace (110M, Zen 4).
  constexpr uint64_t kHugePage = uint64_t{2} << 20;
  const bool huge = bytes >= kHugePage;
  const uint64_t alignment = huge ? kHugePage : 64;
  auto *memory = static_cast<uint8_t *>(std::aligned_alloc(alignment, alignUp(bytes, alignment)));
  if (memory != nullptr && huge)
    madvise(memory, alignUp(bytes, alignment), MADV_HUGEPAGE); // advice: failure is harmless
  if (memory != nullptr) {
    generated_.emplace_back(memory);
    generatedBytes_ += bytes;
  }
  return memory;
}

void LoadedWeights::releaseGenerated(const void *data, uint64_t bytes) {
  auto owned = std::find_if(generated_.begin(), generated_.end(),
                            [&](const auto &memory) { return memory.get() == data; });
  if (owned == generated_.end())
    return;
  generated_.erase(owned);
  generatedBytes_ -= bytes;
}

namespace {

// fn(step) for every step of the plan's CPU programs that reads weights.
template <class Fn> void forEachCpuStepWithWeights(const fb::Plan &meta, const Fn &fn) {
  for (const fb::Program *program : *meta.programs()) {
    if (program->target() != fb::Target::Cpu)
      continue;
    for (const fb::Step *step : *program->steps())
      if (step->weights() != nullptr)
        fn(*step);
  }
}

// Which tensors the CPU programs read as int4 zero points, and which as
// anything else.
struct ZeroUses {
  std::vector<bool> asZeros, asOther;
};

ZeroUses zeroUses(const fb::Plan &meta, size_t tensors) {
  ZeroUses uses{std::vector<bool>(tensors), std::vector<bool>(tensors)};
  forEachCpuStepWithWeights(meta, [&](const fb::Step &step) {
    const int zeros = ops::q4ZerosOperand(step);
    for (uint32_t i = 0; i < step.weights()->size(); ++i) {
      std::vector<bool> &use = static_cast<int>(i) == zeros ? uses.asZeros : uses.asOther;
      use[step.weights()->Get(i)] = true;
    }
  });
  return uses;
}

} // namespace

Status LoadedWeights::packQ4Zeros(const Plan &plan, ThreadPool &pool) {
  const fb::Plan &meta = plan.meta();
  const ZeroUses uses = zeroUses(meta, data_.size());
  for (uint32_t index = 0; index < data_.size(); ++index) {
    if (!uses.asZeros[index])
      continue;
    const std::string name = meta.tensors()->Get(index)->name()->str();
    // The packed tensor has another dtype and size: no other step may read it.
    if (uses.asOther[index])
      return Status::error(plan.path() + ": tensor '" + name +
                           "' is read both as int4 zero points and as another operand");
    // The validator checked the shape: F16 [rows, groups].
    const int64_t rows = shapes_[index][0], groups = shapes_[index][1];
    const int64_t rowBytes = cpu::q4ZeroRowBytes(groups);
    uint8_t *out = allocate(static_cast<uint64_t>(rows * rowBytes));
    if (out == nullptr)
      return Status::error(plan.path() + ": cannot allocate " + std::to_string(rows * rowBytes) +
                           " bytes for the packed zero points of '" + name + "'");
    const Status packed = cpu::packQ4Zeros(pool, static_cast<const uint16_t *>(data_[index]), rows,
                                           groups, out, name);
    if (!packed.isOk())
      return Status::error(plan.path() + ": " + packed.message());
    // A synthetic plan's f16 zeros were generated for this alone.
    releaseGenerated(data_[index], meta.tensors()->Get(index)->size());
    data_[index] = out;
    dtypes_[index] = DType::U8;
    shapes_[index] = {rows, rowBytes};
  }
  return Status::ok();
}

namespace {

// An int4 matrix a CPU step reads: its three tensors and its group size.
struct Q4Use {
  uint32_t words = 0, scales = 0, zeros = 0;
  int64_t groupSize = 0;
  bool operator==(const Q4Use &o) const {
    return words == o.words && scales == o.scales && zeros == o.zeros && groupSize == o.groupSize;
  }
};

int64_t q4GroupSize(const fb::Step &step) {
  if (step.op() == fb::OpKind::Linear)
    return step.params_as_LinearParams()->group_size();
  return step.params_as_LogitsParams()->group_size();
}

// The int4 matrices of the plan's CPU programs, by their words tensor; a
// words tensor read with two different scales, zeros or group sizes gets
// none (it keeps the row-major kernels).
std::vector<Q4Use> q4Uses(const fb::Plan &meta) {
  std::vector<Q4Use> uses;
  std::vector<uint32_t> conflicting;
  forEachCpuStepWithWeights(meta, [&](const fb::Step &step) {
    const int zeros = ops::q4ZerosOperand(step);
    if (zeros < 2)
      return;
    auto weight = [&](int i) { return static_cast<uint32_t>(step.weights()->Get(i)); };
    const Q4Use use{weight(zeros - 2), weight(zeros - 1), weight(zeros), q4GroupSize(step)};
    auto same = std::find_if(uses.begin(), uses.end(),
                             [&](const Q4Use &u) { return u.words == use.words; });
    if (same == uses.end())
      uses.push_back(use);
    else if (!(*same == use))
      conflicting.push_back(use.words);
  });
  uses.erase(std::remove_if(uses.begin(), uses.end(),
                            [&](const Q4Use &u) {
                              return std::count(conflicting.begin(), conflicting.end(), u.words) >
                                     0;
                            }),
             uses.end());
  return uses;
}

} // namespace

Status LoadedWeights::buildQ4Panels(const Plan &plan, ThreadPool &pool, bool release) {
  q4Panels_.assign(data_.size(), nullptr);
  if (!cpu::q4PanelsUsed())
    return Status::ok();
  // The validator checked the shapes: words [rows, q4WordsPerRow(K)], K
  // padded to 32 columns, which gives the panels' words and groups.
  std::vector<Q4Use> uses = q4Uses(plan.meta());
  uses.erase(std::remove_if(
                 uses.begin(), uses.end(),
                 [&](const Q4Use &use) { return !cpu::q4PanelsFor(8 * shapes_[use.words][1]); }),
             uses.end());
  std::vector<cpu::Q4Matrix> matrices;
  uint64_t total = 0;
  for (const Q4Use &use : uses) {
    matrices.push_back({static_cast<const uint32_t *>(data_[use.words]),
                        static_cast<const uint16_t *>(data_[use.scales]),
                        static_cast<const uint8_t *>(data_[use.zeros]), shapes_[use.words][0],
                        8 * shapes_[use.words][1], use.groupSize});
    total += static_cast<uint64_t>(
        cpu::q4PanelBytes(matrices.back().rows, matrices.back().cols, use.groupSize));
  }
  // One buffer for all (64-byte multiples each), on huge pages (allocate).
  uint8_t *out = total > 0 ? allocate(total) : nullptr;
  if (total > 0 && out == nullptr)
    return Status::error(plan.path() + ": cannot allocate " + std::to_string(total) +
                         " bytes for the int4 weights in 16-row panels");
  for (size_t i = 0; i < uses.size(); ++i) {
    const Q4Use &use = uses[i];
    const cpu::Q4Matrix &w = matrices[i];
    cpu::buildQ4Panels(pool, w, out);
    q4Panels_[use.words] = out;
    out += cpu::q4PanelBytes(w.rows, w.cols, w.groupSize);
    if (release)
      releasedPlanBytes_ +=
          plan.releasePages(data_[use.words], plan.meta().tensors()->Get(use.words)->size());
  }
  return Status::ok();
}

namespace {

// The plain bf16 matrices the CPU programs multiply by: the dense matrices of
// Linear steps and of the logits (Logits, LmHead). An embedding table read
// only by Embedding steps gathers a few rows a token and is left plain.
std::vector<uint32_t> bf16Matrices(const fb::Plan &meta, const std::vector<DType> &dtypes) {
  std::vector<uint32_t> matrices;
  auto add = [&](const fb::Step &step, int operand) {
    const auto index = static_cast<uint32_t>(step.weights()->Get(operand));
    if (dtypes[index] == DType::BF16 && std::count(matrices.begin(), matrices.end(), index) == 0)
      matrices.push_back(index);
  };
  forEachCpuStepWithWeights(meta, [&](const fb::Step &step) {
    if (step.op() == fb::OpKind::Linear) {
      const fb::LinearParams &p = *step.params_as_LinearParams();
      if (p.weights() == fb::WeightFormat::Dense)
        add(step, ops::linearOperands(p).matrix);
    } else if (step.op() == fb::OpKind::Logits || step.op() == fb::OpKind::LmHead) {
      const fb::LogitsParams &p = *step.params_as_LogitsParams();
      if (p.weights() == fb::WeightFormat::Dense)
        add(step, ops::logitsMatrix(p));
    }
  });
  return matrices;
}

} // namespace

Status LoadedWeights::codeBf16Matrices(const Plan &plan, ThreadPool &pool, bool release) {
  codedBf16_.assign(data_.size(), cpu::CodedBf16{});
  if (!cpu::codedBf16Used())
    return Status::ok();
  for (uint32_t index : bf16Matrices(plan.meta(), dtypes_)) {
    const cpu::WeightMatrix w = matrix(index);
    const cpu::CodedBf16Layout layout = cpu::planCodedBf16(pool, w);
    if (!cpu::codedBf16Pays(w, layout))
      continue;
    uint8_t *out = allocate(layout.bytes);
    if (out == nullptr)
      return Status::error(plan.path() + ": cannot allocate " + std::to_string(layout.bytes) +
                           " bytes for the coded bf16 rows of '" +
                           plan.meta().tensors()->Get(index)->name()->str() + "'");
    // Blocks of about 8 MiB of bf16, each block's plan pages given back once
    // coded, so that the plain and the coded matrix are not resident together
    // (1B int4 g32, llmrun bench: peak RSS 824.6 MiB, 910.7 in one block).
    // Every kernel that multiplies by it reads the coded rows (decode tiles
    // and the prefill GEMM's panels); a tied embedding's gather maps the few
    // rows it reads back from the plan.
    codedBf16_[index] = cpu::startCodedBf16(w, layout, out);
    const int64_t rowBytes = w.cols * 2;
    const int64_t block = std::max<int64_t>(1, (int64_t{8} << 20) / rowBytes);
    for (int64_t first = 0; first < w.rows; first += block) {
      const int64_t last = std::min(w.rows, first + block);
      cpu::codeBf16Rows(pool, w, layout, out, first, last);
      if (release)
        releasedPlanBytes_ +=
            plan.releasePages(static_cast<const char *>(w.data) + first * rowBytes,
                              static_cast<uint64_t>((last - first) * rowBytes));
    }
  }
  return Status::ok();
}

namespace {

// The tensors a Linear, Logits or LmHead step of the CPU programs reads
// (matrices, int4 scales and zero points, biases, prologue norms), each once.
std::vector<uint32_t> matmulOperands(const fb::Plan &meta) {
  std::vector<uint32_t> tensors;
  forEachCpuStepWithWeights(meta, [&](const fb::Step &step) {
    if (step.op() != fb::OpKind::Linear && step.op() != fb::OpKind::Logits &&
        step.op() != fb::OpKind::LmHead)
      return;
    for (const int32_t index : *step.weights())
      if (std::count(tensors.begin(), tensors.end(), static_cast<uint32_t>(index)) == 0)
        tensors.push_back(static_cast<uint32_t>(index));
  });
  std::sort(tensors.begin(), tensors.end()); // the plan's order: one sequential read
  return tensors;
}

std::atomic<bool> &copyWeightsSetting() {
  static std::atomic<bool> copy{envSwitchOn("LLMC_CPU_COPY_WEIGHTS")};
  return copy;
}

} // namespace

bool LoadedWeights::copiesWeights() { return copyWeightsSetting().load(std::memory_order_relaxed); }

void LoadedWeights::setCopyWeightsForTesting(bool copy) {
  copyWeightsSetting().store(copy, std::memory_order_relaxed);
}

Status LoadedWeights::copyStreamedTensors(const Plan &plan, ThreadPool &pool) {
  if (!copiesWeights())
    return Status::ok();
  // Panels replace an int4 matrix's words and scales; nobody streams those.
  std::vector<bool> readElsewhere(data_.size(), false);
  for (const Q4Use &use : q4Uses(plan.meta()))
    if (q4Panels_[use.words] != nullptr)
      readElsewhere[use.words] = readElsewhere[use.scales] = true;
  std::vector<uint32_t> copied;
  uint64_t total = 0;
  for (uint32_t index : matmulOperands(plan.meta())) {
    // Still the plan's bytes: not generated (synthetic, packed zeros), not coded.
    if (readElsewhere[index] || data_[index] != plan.tensorData(index) ||
        codedBf16_[index].table != nullptr)
      continue;
    copied.push_back(index);
    total += alignUp(plan.meta().tensors()->Get(index)->size(), 64);
  }
  // The copies are anonymous memory where the plan's pages were page cache
  // the kernel could drop: on a machine the weights nearly fill, reading
  // in place is the safer choice, and a failed allocation only costs speed.
  if (total == 0 || total > usableHostMemoryBytes() / 2)
    return Status::ok();
  uint8_t *out = allocate(total);
  if (out == nullptr)
    return Status::ok();
  // Blocks of 8 MiB, split over the threads (each faults in its own pages),
  // each block's plan pages given back once copied: the plan's and the copy
  // of a tensor are not resident together.
  constexpr int64_t kBlock = int64_t{8} << 20, kPiece = int64_t{256} << 10;
  for (uint32_t index : copied) {
    const auto *from = static_cast<const uint8_t *>(data_[index]);
    const auto bytes = static_cast<int64_t>(plan.meta().tensors()->Get(index)->size());
    for (int64_t first = 0; first < bytes; first += kBlock) {
      const int64_t count = std::min(kBlock, bytes - first);
      pool.parallelFor((count + kPiece - 1) / kPiece,
                       [&](int64_t b, int64_t e) {
                         const int64_t begin = first + b * kPiece,
                                       end = std::min(first + e * kPiece, bytes);
                         std::memcpy(out + begin, from + begin, static_cast<size_t>(end - begin));
                       },
                       1);
      releasedPlanBytes_ += plan.releasePages(from + first, static_cast<uint64_t>(count));
    }
    data_[index] = out;
    out += alignUp(static_cast<uint64_t>(bytes), 64);
  }
  return Status::ok();
}

Expected<LoadedWeights> LoadedWeights::load(const Plan &plan, ThreadPool &pool) {
  LoadedWeights weights;
  const auto &tensors = *plan.meta().tensors();
  for (uint32_t i = 0; i < tensors.size(); ++i) {
    const fb::Tensor &t = *tensors.Get(i);
    DType dtype = static_cast<DType>(t.dtype());
    weights.dtypes_.push_back(dtype);
    weights.shapes_.emplace_back(t.shape()->begin(), t.shape()->end());
    if (t.synthetic() == nullptr) {
      weights.data_.push_back(plan.tensorData(i));
      continue;
    }
    uint8_t *memory = weights.allocate(t.size());
    if (memory == nullptr)
      return Status::error(plan.path() + ": cannot allocate " + std::to_string(t.size()) +
                           " bytes for synthetic tensor '" + t.name()->str() + "'");
    const fb::SyntheticInit &init = *t.synthetic();
    if (isSyntheticQ4(init.kind())) {
      // [rows, words or groups]: one cell per (row, group), each a group of normals.
      const int64_t cells = t.shape()->Get(0) * hd::q4NumGroups(init.cols(), init.group_size());
      pool.parallelFor(
          cells,
          [&](int64_t begin, int64_t end) { fillSyntheticQ4(init, begin, end - begin, memory); },
          std::max<int64_t>(1, (1 << 16) / init.group_size()));
    } else {
      const uint64_t count = t.size() / dtypeSize(dtype);
      pool.parallelFor(
          static_cast<int64_t>(count),
          [&](int64_t begin, int64_t end) {
            fillSynthetic(init, dtype, begin, end - begin, memory + begin * dtypeSize(dtype));
          },
          1 << 16);
    }
    weights.data_.push_back(memory);
  }
  LLMC_RETURN_IF_ERROR(weights.packQ4Zeros(plan, pool));
  LLMC_RETURN_IF_ERROR(weights.buildQ4Panels(plan, pool, true));
  LLMC_RETURN_IF_ERROR(weights.codeBf16Matrices(plan, pool, true));
  LLMC_RETURN_IF_ERROR(weights.copyStreamedTensors(plan, pool));
  return weights;
}

Expected<LoadedWeights> LoadedWeights::fromViews(const Plan &plan, std::vector<const void *> data) {
  const auto &tensors = *plan.meta().tensors();
  if (data.size() != tensors.size())
    return Status::error(plan.path() + ": " + std::to_string(data.size()) +
                         " tensor views for a plan of " + std::to_string(tensors.size()) +
                         " tensors");
  LoadedWeights weights;
  for (uint32_t i = 0; i < tensors.size(); ++i) {
    const fb::Tensor &t = *tensors.Get(i);
    if (data[i] == nullptr)
      return Status::error(plan.path() + ": no data for tensor '" + t.name()->str() + "'");
    weights.dtypes_.push_back(static_cast<DType>(t.dtype()));
    weights.shapes_.emplace_back(t.shape()->begin(), t.shape()->end());
  }
  weights.data_ = std::move(data);
  ThreadPool oneThread(1);
  LLMC_RETURN_IF_ERROR(weights.packQ4Zeros(plan, oneThread));
  LLMC_RETURN_IF_ERROR(weights.buildQ4Panels(plan, oneThread, false));
  LLMC_RETURN_IF_ERROR(weights.codeBf16Matrices(plan, oneThread, false));
  return weights;
}

LoadedWeights LoadedWeights::replaced(const std::vector<Replacement> &replacements) const {
  LoadedWeights view;
  view.data_ = data_;
  view.dtypes_ = dtypes_;
  view.shapes_ = shapes_;
  view.q4Panels_ = q4Panels_;
  view.codedBf16_ = codedBf16_;
  for (const Replacement &r : replacements) {
    view.data_[r.index] = r.matrix.data;
    view.dtypes_[r.index] = r.matrix.dtype;
    view.q4Panels_[r.index] = nullptr;
    view.codedBf16_[r.index] = cpu::CodedBf16{};
  }
  return view;
}

cpu::WeightMatrix LoadedWeights::matrix(uint32_t index) const {
  const auto &shape = shapes_[index];
  return {data_[index], dtypes_[index], shape[0], shape.size() > 1 ? shape[1] : 1,
          index < codedBf16_.size() ? codedBf16_[index] : cpu::CodedBf16{}};
}

uint64_t LoadedWeights::codedBf16Bytes(uint32_t index) const {
  if (index >= codedBf16_.size() || codedBf16_[index].table == nullptr)
    return 0;
  const int64_t rows = shapes_[index][0];
  return cpu::codedBf16Bytes(rows, shapes_[index][1], codedBf16_[index].exceptionBegin[rows]);
}

cpu::WeightVector LoadedWeights::vector(uint32_t index) const {
  return {data_[index], dtypes_[index], shapes_[index][0]};
}

} // namespace llmc
