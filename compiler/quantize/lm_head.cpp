#include "quantize/lm_head.h"

#include "kernels/common/half.h"
#include "kernels/common/q4_layout.h"
#include "kernels/common/q8_layout.h"
#include "ops/operands.h"
#include "quantize/int8.h"
#include "quantize/q4_quantize.h"

#include <cstring>
#include <map>

namespace llmc::quant {
namespace {

// The float values of a stored source [elements] (its parts stacked).
Expected<std::vector<float>> floatValues(const WeightSource &source, const std::string &name) {
  std::vector<float> values;
  values.reserve(source.elements);
  auto append = [&](const WeightSource &s) -> Status {
    if (s.data == nullptr)
      return Status::error("lm_head weight '" + name + "': no stored values");
    for (uint64_t i = 0; i < s.elements; ++i) {
      uint16_t h = 0;
      float v = 0.0f;
      if (s.dtype == DType::F32) {
        std::memcpy(&v, s.data + 4 * i, 4);
      } else if (s.dtype == DType::F16 || s.dtype == DType::BF16) {
        std::memcpy(&h, s.data + 2 * i, 2);
        v = s.dtype == DType::F16 ? hd::f16ToF32(h) : hd::bf16ToF32(h);
      } else {
        return Status::error("lm_head weight '" + name + "': source dtype " +
                             std::string(dtypeName(s.dtype)) + " is not a float");
      }
      values.push_back(v);
    }
    return Status::ok();
  };
  if (source.parts.empty())
    LLMC_RETURN_IF_ERROR(append(source));
  for (const WeightSource &part : source.parts)
    LLMC_RETURN_IF_ERROR(append(part));
  if (values.size() != source.elements)
    return Status::error("lm_head weight '" + name + "': " + std::to_string(values.size()) +
                         " values for " + std::to_string(source.elements) + " elements");
  return values;
}

// "lm_head.weight" -> "lm_head" (the int4 parts' names follow q4WeightName).
std::string baseName(const std::string &name) {
  const std::string suffix = ".weight";
  if (name.size() > suffix.size() &&
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    return name.substr(0, name.size() - suffix.size());
  return name;
}

struct Part {
  std::string name;
  fb::DType dtype;
  int64_t cols;
  const void *bytes; // null: synthetic
  uint64_t elements;
  DType sourceDtype;
  fb::SyntheticKind synthetic;
};

class HeadQuantizer {
public:
  HeadQuantizer(ThreadPool &pool, PlanContents &plan, fb::WeightFormat format, int64_t groupSize,
                std::vector<std::vector<uint8_t>> &storage)
      : pool_(pool), plan_(plan), format_(format), group_(groupSize), storage_(storage) {}

  // Quantizes tensor `t`; returns the index of its first part: t itself
  // when `inPlace` (nothing else reads it), else a new tensor. The other
  // parts are appended to the plan's tensors in order.
  Expected<int> quantize(int t, bool inPlace, LmHeadQuantization &summary) {
    fb::TensorT &tensor = *plan_.meta.tensors[t];
    if (tensor.shape.size() != 2)
      return Status::error("lm_head weight '" + tensor.name + "' must be 2-D");
    const int64_t rows = tensor.shape[0], cols = tensor.shape[1];
    std::vector<Part> parts;
    LLMC_RETURN_IF_ERROR(makeParts(t, rows, cols, parts));
    summary.floatBytes += static_cast<uint64_t>(rows * cols) *
                          (tensor.dtype == fb::DType::F32 ? 4 : 2); // F32, F16 or BF16
    // Copied before `tensors` grows: the reference would dangle.
    const fb::SyntheticInitT *init = tensor.synthetic.get();
    const fb::SyntheticInitT base = init ? *init : fb::SyntheticInitT{};
    int first = inPlace ? t : static_cast<int>(plan_.meta.tensors.size());
    for (size_t i = 0; i < parts.size(); ++i) {
      const Part &part = parts[i];
      auto made = std::make_unique<fb::TensorT>();
      made->name = part.name;
      made->dtype = part.dtype;
      made->shape = {rows, part.cols};
      if (part.bytes == nullptr) {
        made->synthetic = std::make_unique<fb::SyntheticInitT>(base);
        made->synthetic->kind = part.synthetic;
        made->synthetic->cols = cols;
        made->synthetic->group_size = group_;
      }
      WeightSource source{static_cast<const uint8_t *>(part.bytes), part.sourceDtype,
                          part.elements, {}};
      summary.quantizedBytes += part.elements * dtypeSize(part.sourceDtype);
      if (inPlace && i == 0) {
        plan_.meta.tensors[t] = std::move(made);
        plan_.sources[t] = source;
      } else {
        plan_.meta.tensors.push_back(std::move(made));
        plan_.sources.push_back(source);
      }
    }
    ++summary.matrices;
    return first;
  }

private:
  Status makeParts(int t, int64_t rows, int64_t cols, std::vector<Part> &parts) {
    const fb::TensorT &tensor = *plan_.meta.tensors[t];
    const std::string base = baseName(tensor.name);
    const bool synthetic = plan_.meta.synthetic && tensor.synthetic != nullptr;
    if (format_ == fb::WeightFormat::Q4) {
      const int64_t words = hd::q4WordsPerRow(cols), groups = hd::q4NumGroups(cols, group_);
      const uint64_t n = static_cast<uint64_t>(rows);
      if (synthetic) {
        parts = {{base + ".qweight", fb::DType::I32, words, nullptr, n * words, DType::I32,
                  fb::SyntheticKind::Q4Weight},
                 {base + ".scales", fb::DType::F16, groups, nullptr, n * groups, DType::F16,
                  fb::SyntheticKind::Q4Scales},
                 {base + ".zeros", fb::DType::F16, groups, nullptr, n * groups, DType::F16,
                  fb::SyntheticKind::Q4Zeros}};
        return Status::ok();
      }
      LLMC_ASSIGN_OR_RETURN(std::vector<float> w, floatValues(plan_.sources[t], tensor.name));
      Q4Tensor q = quantizeQ4(pool_, w.data(), rows, cols, group_);
      parts = {{base + ".qweight", fb::DType::I32, words, keep(q.qweight), q.qweight.size(),
                DType::I32, fb::SyntheticKind::Normal},
               {base + ".scales", fb::DType::F16, groups, keep(q.scales), q.scales.size(),
                DType::F16, fb::SyntheticKind::Normal},
               {base + ".zeros", fb::DType::F16, groups, keep(q.zeros), q.zeros.size(),
                DType::F16, fb::SyntheticKind::Normal}};
      return Status::ok();
    }
    if (synthetic)
      return Status::error("--quantize-lm-head with --quantize int8 needs checkpoint weights, "
                           "not --synthetic-weights (use int4, or a checkpoint)");
    LLMC_ASSIGN_OR_RETURN(std::vector<float> w, floatValues(plan_.sources[t], tensor.name));
    const bool half = group_ > 0;
    LLMC_ASSIGN_OR_RETURN(Q8Tensor q, quantizeQ8(pool_, w.data(), rows, cols, group_, half,
                                                 tensor.name));
    const int64_t groups = hd::q8NumGroups(cols, group_);
    const void *scales = half ? keep(q.halfScaleBits) : keep(q.scales);
    parts = {{base + ".q8weight", fb::DType::I8, hd::q8RowBytes(cols), keep(q.qweight),
              q.qweight.size(), DType::I8, fb::SyntheticKind::Normal},
             {base + ".q8scales", half ? fb::DType::F16 : fb::DType::F32, groups, scales,
              static_cast<uint64_t>(rows * groups), half ? DType::F16 : DType::F32,
              fb::SyntheticKind::Normal}};
    return Status::ok();
  }

  template <typename T> const void *keep(const std::vector<T> &values) {
    const auto *bytes = reinterpret_cast<const uint8_t *>(values.data());
    storage_.emplace_back(bytes, bytes + values.size() * sizeof(T));
    return storage_.back().data();
  }

  ThreadPool &pool_;
  PlanContents &plan_;
  fb::WeightFormat format_;
  int64_t group_;
  std::vector<std::vector<uint8_t>> &storage_;
};

} // namespace

Expected<LmHeadQuantization> quantizePlanLmHead(ThreadPool &pool, PlanContents &plan,
                                                fb::WeightFormat format, int64_t groupSize,
                                                std::vector<std::vector<uint8_t>> &storage) {
  if (format == fb::WeightFormat::Q4 && !hd::q4ValidGroupSize(groupSize))
    return Status::error("--quantize-lm-head: int4 group size " + std::to_string(groupSize) +
                         " is not a positive multiple of 32");
  if (format == fb::WeightFormat::Q8 && !hd::q8ValidGroupSize(groupSize))
    return Status::error("--quantize-lm-head: int8 group size " + std::to_string(groupSize) +
                         " is not 0 or a positive multiple of 32");
  if (format == fb::WeightFormat::Dense)
    return Status::error("internal: --quantize-lm-head needs int4 or int8");
  // Which tensors the heads read, and whether any other step reads them.
  const auto &tensors = plan.meta.tensors;
  std::vector<int> headUses(tensors.size(), 0), otherUses(tensors.size(), 0);
  for (const auto &program : plan.meta.programs)
    for (const auto &step : program->steps) {
      const fb::LogitsParamsT *p = step->params.AsLogitsParams();
      const int matrix = p != nullptr && p->weights == fb::WeightFormat::Dense
                             ? (p->norm ? (p->norm->bias ? 2 : 1) : 0)
                             : -1;
      for (size_t i = 0; i < step->weights.size(); ++i)
        ++(static_cast<int>(i) == matrix ? headUses : otherUses)[step->weights[i]];
    }
  LmHeadQuantization summary;
  HeadQuantizer quantizer(pool, plan, format, groupSize, storage);
  std::map<int, std::vector<int>> partsOf; // float tensor -> its quantized parts
  const size_t numTensors = tensors.size();
  for (size_t t = 0; t < numTensors; ++t) {
    if (headUses[t] == 0)
      continue;
    const bool inPlace = otherUses[t] == 0;
    const size_t before = plan.meta.tensors.size();
    LLMC_ASSIGN_OR_RETURN(int first, quantizer.quantize(static_cast<int>(t), inPlace, summary));
    std::vector<int> parts = {first};
    const size_t after = plan.meta.tensors.size();
    for (size_t i = before + (inPlace ? 0 : 1); i < after; ++i)
      parts.push_back(static_cast<int>(i));
    partsOf[static_cast<int>(t)] = parts;
  }
  for (const auto &program : plan.meta.programs)
    for (const auto &step : program->steps) {
      fb::LogitsParamsT *p = step->params.AsLogitsParams();
      if (p == nullptr || p->weights != fb::WeightFormat::Dense)
        continue;
      const int matrix = p->norm ? (p->norm->bias ? 2 : 1) : 0;
      auto it = partsOf.find(step->weights[matrix]);
      if (it == partsOf.end())
        continue;
      step->weights.erase(step->weights.begin() + matrix);
      step->weights.insert(step->weights.begin() + matrix, it->second.begin(), it->second.end());
      p->weights = format;
      p->group_size = groupSize;
      step->library_gemm.reset(); // cuBLASLt takes dense weights only
      ++summary.steps;
    }
  return summary;
}

} // namespace llmc::quant
