// The weights the quantizer reads and writes, by name: views of checkpoint
// tensors (any float dtype, in place in the mmap'd safetensors), and tensors
// it owns (synthetic weights materialized for calibration; the derived
// tensors the plan stores: AWQ-scaled floats, packed int4 parts).
#pragma once

#include "cpu/weights.h"
#include "support/dtype.h"
#include "support/status.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
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
  WeightTable();
  ~WeightTable();
  WeightTable(const WeightTable &) = delete;
  WeightTable &operator=(const WeightTable &) = delete;

  // A tensor that lives elsewhere for as long as the table (the checkpoint).
  // `fileMapped`: the bytes are a read-only mapping of a file, whose pages
  // release() may hand back to the OS (they are read again when touched).
  void addView(const std::string &name, const void *data, DType dtype, std::vector<int64_t> shape,
               bool fileMapped = false);
  // An f32 tensor generated on demand (synthetic weights): `fill` writes its
  // values. Its address is fixed from the start (reserved, not resident);
  // the values are written when acquire() or a reader (find, get, matrix,
  // toF32, ...) first needs them, and release() drops them again.
  using Generator = std::function<void(float *values, uint64_t count)>;
  void addGenerated(const std::string &name, std::vector<int64_t> shape, Generator fill);
  // A tensor the table owns. Replaces an entry of the same name.
  void addOwned(const std::string &name, std::vector<float> values, std::vector<int64_t> shape);
  void addOwned(const std::string &name, std::vector<uint32_t> words, std::vector<int64_t> shape);
  void addOwned(const std::string &name, std::vector<uint16_t> halves, std::vector<int64_t> shape);

  // The entry, with a generated tensor's values written.
  const WeightEntry *find(const std::string &name) const;
  // The entry as it is: a generated tensor's address, its values only after
  // acquire() (the calibration model points its plan at it).
  const WeightEntry *peek(const std::string &name) const;

  // Residency, for calibration one segment at a time: acquire writes the
  // named generated tensors; release drops them (their pages go back to the
  // OS) and hands the pages of file-mapped views back (madvise
  // MADV_DONTNEED). Other tensors are left as they are. Unknown names are
  // skipped.
  void acquire(const std::vector<std::string> &names) const;
  void release(const std::vector<std::string> &names) const;
  // Bytes of generated tensors written now, and the most at any time.
  uint64_t generatedResidentBytes() const;
  uint64_t peakGeneratedResidentBytes() const;
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
  // A generated tensor: an anonymous mapping of `bytes`, written or not.
  struct Generated {
    void *pages = nullptr;
    uint64_t bytes = 0;
    Generator fill;
    bool resident = false;
  };
  void makeResident(Generated &g, const WeightEntry &entry) const;
  void dropOwnership(const std::string &name);

  std::map<std::string, WeightEntry> entries_;
  std::map<std::string, std::unique_ptr<Owned>> owned_;
  std::map<std::string, bool> fileMapped_;
  mutable std::map<std::string, Generated> generated_;
  mutable std::mutex residency_;
  mutable uint64_t residentBytes_ = 0, peakResidentBytes_ = 0;
};

} // namespace llmc::quant
