#include "engine/weights.h"

#include "kernels/common/half.h"
#include "kernels/common/synthetic.h"
#include "plan/plan_format.h"

#include <cstdlib>
#include <cstring>

namespace llmc {

void LoadedWeights::FreeAligned::operator()(uint8_t *p) const { std::free(p); }

void fillSynthetic(const fb::SyntheticInit &init, DType dtype, uint64_t first, uint64_t count,
                   void *out) {
  for (uint64_t i = 0; i < count; ++i) {
    float value = 0.0f;
    switch (init.kind()) {
    case fb::SyntheticKind::Normal:
      value = init.std() * hd::syntheticNormal(init.seed(), first + i);
      break;
    case fb::SyntheticKind::Ones:
      value = 1.0f;
      break;
    case fb::SyntheticKind::Zeros:
      value = 0.0f;
      break;
    }
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
    uint64_t bytes = alignUp(t.size(), 64);
    auto *memory = static_cast<uint8_t *>(std::aligned_alloc(64, bytes));
    if (memory == nullptr)
      return Status::error(plan.path() + ": cannot allocate " + std::to_string(bytes) +
                           " bytes for synthetic tensor '" + t.name()->str() + "'");
    uint64_t count = t.size() / dtypeSize(dtype);
    const fb::SyntheticInit &init = *t.synthetic();
    constexpr int64_t kGrain = 1 << 16;
    pool.parallelFor(
        static_cast<int64_t>(count),
        [&](int64_t begin, int64_t end) {
          fillSynthetic(init, dtype, begin, end - begin, memory + begin * dtypeSize(dtype));
        },
        kGrain);
    weights.data_.push_back(memory);
    weights.generated_.emplace_back(memory);
    weights.generatedBytes_ += t.size();
  }
  return weights;
}

cpu::WeightMatrix LoadedWeights::matrix(uint32_t index) const {
  const auto &shape = shapes_[index];
  return {data_[index], dtypes_[index], shape[0], shape.size() > 1 ? shape[1] : 1};
}

cpu::WeightVector LoadedWeights::vector(uint32_t index) const {
  return {data_[index], dtypes_[index], shapes_[index][0]};
}

} // namespace llmc
