// The weights the quantizer reads and writes, by name: views of checkpoint
// tensors (any float dtype, in place in the mmap'd safetensors), and tensors
// it owns (synthetic weights materialized for calibration; the derived
// tensors the plan stores: AWQ-scaled floats, packed int4 parts).
#pragma once

#include "cpu/weights.h"
#include "support/dtype.h"
#include "support/status.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace llmc::quant {

struct WeightEntry {
  const void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t elements() const;
};

class WeightTable {
public:
  // A tensor that lives elsewhere for as long as the table (the checkpoint).
  void addView(const std::string &name, const void *data, DType dtype, std::vector<int64_t> shape);
  // A tensor the table owns. Replaces an entry of the same name.
  void addOwned(const std::string &name, std::vector<float> values, std::vector<int64_t> shape);
  void addOwned(const std::string &name, std::vector<uint32_t> words, std::vector<int64_t> shape);
  void addOwned(const std::string &name, std::vector<uint16_t> halves, std::vector<int64_t> shape);

  const WeightEntry *find(const std::string &name) const;
  // The entry, or an error naming the weight.
  Expected<const WeightEntry *> get(const std::string &name) const;
  // As the CPU kernels read it: [rows, cols] or [size]; F32, F16 or BF16.
  Expected<cpu::WeightMatrix> matrix(const std::string &name) const;
  Expected<cpu::WeightVector> vector(const std::string &name) const;
  // A float tensor's values as f32.
  Expected<std::vector<float>> toF32(const std::string &name) const;

private:
  struct Owned {
    std::vector<float> f32;
    std::vector<uint32_t> u32;
    std::vector<uint16_t> u16;
  };
  std::map<std::string, WeightEntry> entries_;
  std::map<std::string, std::unique_ptr<Owned>> owned_;
};

} // namespace llmc::quant
