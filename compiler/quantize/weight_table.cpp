#include "quantize/weight_table.h"

namespace llmc::quant {

uint64_t WeightEntry::elements() const {
  uint64_t n = 1;
  for (int64_t d : shape)
    n *= static_cast<uint64_t>(d);
  return n;
}

void WeightTable::addView(const std::string &name, const void *data, DType dtype,
                          std::vector<int64_t> shape) {
  owned_.erase(name);
  entries_[name] = {data, dtype, std::move(shape)};
}

void WeightTable::addOwned(const std::string &name, std::vector<float> values,
                           std::vector<int64_t> shape) {
  auto owned = std::make_unique<Owned>();
  owned->f32 = std::move(values);
  entries_[name] = {owned->f32.data(), DType::F32, std::move(shape)};
  owned_[name] = std::move(owned);
}

void WeightTable::addOwned(const std::string &name, std::vector<uint32_t> words,
                           std::vector<int64_t> shape) {
  auto owned = std::make_unique<Owned>();
  owned->u32 = std::move(words);
  entries_[name] = {owned->u32.data(), DType::I32, std::move(shape)};
  owned_[name] = std::move(owned);
}

void WeightTable::addOwned(const std::string &name, std::vector<uint16_t> halves,
                           std::vector<int64_t> shape) {
  auto owned = std::make_unique<Owned>();
  owned->u16 = std::move(halves);
  entries_[name] = {owned->u16.data(), DType::F16, std::move(shape)};
  owned_[name] = std::move(owned);
}

const WeightEntry *WeightTable::find(const std::string &name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

Expected<const WeightEntry *> WeightTable::get(const std::string &name) const {
  const WeightEntry *entry = find(name);
  if (entry == nullptr)
    return Status::error("weight '" + name + "' is not in the checkpoint");
  return entry;
}

Expected<cpu::WeightMatrix> WeightTable::matrix(const std::string &name) const {
  LLMC_ASSIGN_OR_RETURN(const WeightEntry *e, get(name));
  if (e->shape.size() != 2)
    return Status::error("weight '" + name + "': expected a matrix, got " +
                         std::to_string(e->shape.size()) + " dimensions");
  cpu::WeightMatrix m{e->data, e->dtype, e->shape[0], e->shape[1]};
  LLMC_RETURN_IF_ERROR(cpu::checkWeight(m, name));
  return m;
}

Expected<cpu::WeightVector> WeightTable::vector(const std::string &name) const {
  LLMC_ASSIGN_OR_RETURN(const WeightEntry *e, get(name));
  if (e->shape.size() != 1)
    return Status::error("weight '" + name + "': expected a vector, got " +
                         std::to_string(e->shape.size()) + " dimensions");
  cpu::WeightVector v{e->data, e->dtype, e->shape[0]};
  LLMC_RETURN_IF_ERROR(cpu::checkWeight(v, name));
  return v;
}

Expected<std::vector<float>> WeightTable::toF32(const std::string &name) const {
  LLMC_ASSIGN_OR_RETURN(const WeightEntry *e, get(name));
  if (e->dtype != DType::F32 && e->dtype != DType::F16 && e->dtype != DType::BF16)
    return Status::error("weight '" + name + "': dtype " + std::string(dtypeName(e->dtype)) +
                         " is not a float dtype");
  std::vector<float> values(e->elements());
  cpu::weightsToF32(e->data, e->dtype, 0, static_cast<int64_t>(values.size()), values.data());
  return values;
}

} // namespace llmc::quant
