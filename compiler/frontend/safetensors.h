// safetensors reader: mmap-based, no copy, fully validated.
//
// File layout (https://github.com/huggingface/safetensors):
//   [0, 8)          u64 little-endian N: header length in bytes
//   [8, 8 + N)      UTF-8 JSON object: { "<tensor name>": {"dtype": "F32",
//                   "shape": [d0, ...], "data_offsets": [begin, end]}, ...,
//                   "__metadata__": {"k": "v", ...} (optional, strings only) }
//   [8 + N, EOF)    data buffer; offsets are relative to its start
// Rules enforced (each failure names the file, and the tensor where there is
// one): file >= 8 bytes; N <= 100,000,000 and 8 + N <= file size; header valid
// UTF-8, a JSON object beginning with '{' (trailing spaces allowed: writers pad
// the header to align the data); no duplicate names; each entry exactly
// {dtype, shape, data_offsets}; a dtype llmc reads (F32, F16, BF16, I8, U8,
// I32, I64; other safetensors dtypes are "unsupported"); shape dims
// non-negative integers; data_offsets two non-negative integers, begin <= end;
// prod(shape) * dtype size (overflow-checked) == end - begin; sorted by begin,
// the tensors tile the data buffer exactly: the first begins at 0, each begins
// where the previous ends (no hole, no overlap), the last ends at EOF.
// Zero-sized tensors (a dim 0) are legal. The format does not align tensor
// data: TensorView::data may be unaligned for its dtype.
#pragma once

#include "support/dtype.h"
#include "support/mapped_file.h"
#include "support/status.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace llmc {

struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const uint8_t *data = nullptr; // points into the mapping
  uint64_t byteSize = 0;
  std::string file; // the file it came from (for messages)
};

// The parsed header of one file: tensors with offsets relative to the data buffer.
struct SafetensorsHeader {
  struct Entry {
    std::string name;
    DType dtype = DType::F32;
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;
  };
  uint64_t headerSize = 0;    // N
  std::vector<Entry> tensors; // sorted by begin offset
  std::map<std::string, std::string> metadata;
};

// Validates the whole file image `bytes[0, size)` (header and data layout)
// without touching tensor data. `fileName` prefixes every error.
// This is the fuzzed entry point.
Expected<SafetensorsHeader> parseSafetensors(const uint8_t *bytes, uint64_t size,
                                             const std::string &fileName);

// One mapped, validated .safetensors file.
class SafetensorsFile {
public:
  static Expected<SafetensorsFile> open(const std::string &path);
  const std::vector<TensorView> &tensors() const { return tensors_; }
  const std::map<std::string, std::string> &metadata() const { return header_.metadata; }
  const std::string &path() const { return file_.path(); }
  const SafetensorsHeader &header() const { return header_; }
  const MappedFile &mapping() const { return file_; }

private:
  MappedFile file_;
  SafetensorsHeader header_;
  std::vector<TensorView> tensors_;
};

// All tensors of a checkpoint: one file, a list of files, or shards named by a
// model.safetensors.index.json ({"metadata": {...}, "weight_map": {"tensor":
// "shard file"}}, shard paths relative to the index's folder). Every mapping is
// checked against the shard that actually holds the tensor, and every tensor of
// a shard must be in weight_map. A tensor name present in two files is an
// error naming both.
class WeightSet {
public:
  static Expected<WeightSet> openFiles(const std::vector<std::string> &paths);
  static Expected<WeightSet> openIndex(const std::string &indexJsonPath);

  const TensorView *find(const std::string &name) const;
  const std::map<std::string, TensorView> &all() const { return byName_; }
  // Adds a tensor made at import from others (derived_tensors.h): `view`'s
  // data is set to `bytes`, which the set keeps. Rejects a name already there.
  Status addDerived(TensorView view, std::vector<uint8_t> bytes);
  // Adds `view` as a second name of bytes the set already holds (a derived
  // tensor that is one stored tensor whole: EXAONE 3.x's renamed tensors).
  // Rejects a name already there.
  Status addAlias(TensorView view);
  uint64_t totalBytes() const;
  const std::vector<SafetensorsFile> &files() const { return files_; }

private:
  // Takes ownership of `file` and indexes its tensors; rejects names already seen.
  Status add(SafetensorsFile file);

  std::vector<SafetensorsFile> files_;
  std::map<std::string, TensorView> byName_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> derived_; // addDerived's bytes
};

} // namespace llmc
