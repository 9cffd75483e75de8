#include "quantize/weight_table.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>

namespace llmc::quant {
namespace {

uint64_t pageSize() { return static_cast<uint64_t>(sysconf(_SC_PAGESIZE)); }

// Gives the whole pages inside [data, data + bytes) back to the OS.
void dropPages(const void *data, uint64_t bytes) {
  const uint64_t page = pageSize();
  const uint64_t begin = (reinterpret_cast<uint64_t>(data) + page - 1) / page * page;
  const uint64_t end = (reinterpret_cast<uint64_t>(data) + bytes) / page * page;
  if (end > begin)
    madvise(reinterpret_cast<void *>(begin), end - begin, MADV_DONTNEED);
}

} // namespace

WeightTable::WeightTable() = default;

WeightTable::~WeightTable() {
  for (auto &[name, g] : generated_)
    munmap(g.pages, g.bytes);
}

void WeightTable::dropOwnership(const std::string &name) {
  owned_.erase(name);
  fileMapped_.erase(name);
  auto g = generated_.find(name);
  if (g != generated_.end()) {
    if (g->second.resident)
      residentBytes_ -= g->second.bytes;
    munmap(g->second.pages, g->second.bytes);
    generated_.erase(g);
  }
}

void WeightTable::addGenerated(const std::string &name, std::vector<int64_t> shape,
                               Generator fill) {
  dropOwnership(name);
  WeightEntry entry{nullptr, DType::F32, std::move(shape)};
  Generated g;
  g.bytes = std::max<uint64_t>(1, entry.elements() * sizeof(float));
  // Reserved address space: no page is resident until written.
  g.pages = mmap(nullptr, g.bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (g.pages == MAP_FAILED) { // no address space: an ordinary allocation, written now
    g.pages = nullptr;
    auto owned = std::make_unique<Owned>();
    owned->f32.resize(entry.elements());
    fill(owned->f32.data(), entry.elements());
    entry.data = owned->f32.data();
    entries_[name] = std::move(entry);
    owned_[name] = std::move(owned);
    return;
  }
  g.fill = std::move(fill);
  entry.data = g.pages;
  entries_[name] = std::move(entry);
  generated_[name] = std::move(g);
}

void WeightTable::makeResident(Generated &g, const WeightEntry &entry) const {
  if (g.resident)
    return;
  g.fill(static_cast<float *>(g.pages), entry.elements());
  g.resident = true;
  residentBytes_ += g.bytes;
  peakResidentBytes_ = std::max(peakResidentBytes_, residentBytes_);
}

const WeightEntry *WeightTable::peek(const std::string &name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

void WeightTable::acquire(const std::vector<std::string> &names) const {
  std::lock_guard<std::mutex> lock(residency_);
  for (const std::string &name : names) {
    auto g = generated_.find(name);
    if (g != generated_.end())
      makeResident(g->second, entries_.at(name));
  }
}

void WeightTable::release(const std::vector<std::string> &names) const {
  std::lock_guard<std::mutex> lock(residency_);
  for (const std::string &name : names) {
    auto g = generated_.find(name);
    if (g != generated_.end()) {
      if (g->second.resident) {
        madvise(g->second.pages, g->second.bytes, MADV_DONTNEED); // reads back as zeros
        g->second.resident = false;
        residentBytes_ -= g->second.bytes;
      }
      continue;
    }
    auto mapped = fileMapped_.find(name);
    if (mapped != fileMapped_.end() && mapped->second) {
      const WeightEntry &e = entries_.at(name);
      dropPages(e.data, e.elements() * dtypeSize(e.dtype));
    }
  }
}

uint64_t WeightTable::generatedResidentBytes() const {
  std::lock_guard<std::mutex> lock(residency_);
  return residentBytes_;
}

uint64_t WeightTable::peakGeneratedResidentBytes() const {
  std::lock_guard<std::mutex> lock(residency_);
  return peakResidentBytes_;
}

uint64_t WeightEntry::elements() const {
  uint64_t n = 1;
  for (int64_t d : shape)
    n *= static_cast<uint64_t>(d);
  return n;
}

void WeightTable::addView(const std::string &name, const void *data, DType dtype,
                          std::vector<int64_t> shape, bool fileMapped) {
  dropOwnership(name);
  entries_[name] = {data, dtype, std::move(shape)};
  if (fileMapped)
    fileMapped_[name] = true;
}

void WeightTable::addOwned(const std::string &name, std::vector<float> values,
                           std::vector<int64_t> shape) {
  dropOwnership(name);
  auto owned = std::make_unique<Owned>();
  owned->f32 = std::move(values);
  entries_[name] = {owned->f32.data(), DType::F32, std::move(shape)};
  owned_[name] = std::move(owned);
}

void WeightTable::addOwned(const std::string &name, std::vector<uint32_t> words,
                           std::vector<int64_t> shape) {
  dropOwnership(name);
  auto owned = std::make_unique<Owned>();
  owned->u32 = std::move(words);
  entries_[name] = {owned->u32.data(), DType::I32, std::move(shape)};
  owned_[name] = std::move(owned);
}

void WeightTable::addOwned(const std::string &name, std::vector<uint16_t> halves,
                           std::vector<int64_t> shape) {
  dropOwnership(name);
  auto owned = std::make_unique<Owned>();
  owned->u16 = std::move(halves);
  entries_[name] = {owned->u16.data(), DType::F16, std::move(shape)};
  owned_[name] = std::move(owned);
}

const WeightEntry *WeightTable::find(const std::string &name) const {
  auto it = entries_.find(name);
  if (it == entries_.end())
    return nullptr;
  auto g = generated_.find(name);
  if (g != generated_.end()) {
    std::lock_guard<std::mutex> lock(residency_);
    makeResident(g->second, it->second);
  }
  return &it->second;
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
