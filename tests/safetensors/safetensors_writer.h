// Writes .safetensors files from a description, for tests that need valid
// files and for tests that corrupt one field at a time.
//
//   SafetensorsImage image = makeImage({{"a", "F32", {2, 3}}, {"b", "F16", {4}}});
//   image.header["a"]["dtype"] = "F99";                     // corrupt one field
//   writeFile(dir + "/x.safetensors", image.bytes());
#pragma once

#include "support/dtype.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace llmc::test {

struct TensorSpec {
  std::string name;
  std::string dtype = "F32";
  std::vector<int64_t> shape;
};

// Byte `k` of the tensor at position `index` in a description: distinct per
// tensor so a test can tell which bytes a TensorView points at.
inline uint8_t patternByte(size_t index, uint64_t k) {
  return static_cast<uint8_t>(index * 31 + k * 7 + 1);
}

inline uint64_t specBytes(const TensorSpec &spec) {
  std::optional<DType> dtype = dtypeFromName(spec.dtype);
  uint64_t bytes = dtype ? dtypeSize(*dtype) : 8; // unsupported dtypes: any size will do
  for (int64_t dim : spec.shape)
    bytes *= static_cast<uint64_t>(dim);
  return bytes;
}

// A file image: the header as JSON (edit it to corrupt a field) and the data buffer.
struct SafetensorsImage {
  nlohmann::json header = nlohmann::json::object();
  std::vector<uint8_t> data;
  // Spaces appended to the header text until 8 + N is a multiple of this (HF pads to 8).
  size_t padTo = 1;

  std::string headerText() const {
    std::string text = header.dump();
    while ((8 + text.size()) % padTo != 0)
      text += ' ';
    return text;
  }
  std::vector<uint8_t> bytes() const;
};

// 8-byte little-endian `headerLength` + header text + data.
inline std::vector<uint8_t> assemble(const std::string &headerText,
                                     const std::vector<uint8_t> &data, uint64_t headerLength) {
  std::vector<uint8_t> out;
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<uint8_t>(headerLength >> (8 * i)));
  out.insert(out.end(), headerText.begin(), headerText.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

inline std::vector<uint8_t> assemble(const std::string &headerText,
                                     const std::vector<uint8_t> &data = {}) {
  return assemble(headerText, data, headerText.size());
}

inline std::vector<uint8_t> SafetensorsImage::bytes() const { return assemble(headerText(), data); }

// A valid image: tensors laid out in the order given, data filled with patternByte.
inline SafetensorsImage makeImage(const std::vector<TensorSpec> &tensors,
                                  const std::map<std::string, std::string> &metadata = {}) {
  SafetensorsImage image;
  for (size_t i = 0; i < tensors.size(); ++i) {
    uint64_t begin = image.data.size(), size = specBytes(tensors[i]);
    for (uint64_t k = 0; k < size; ++k)
      image.data.push_back(patternByte(i, k));
    image.header[tensors[i].name] = {{"dtype", tensors[i].dtype},
                                     {"shape", tensors[i].shape},
                                     {"data_offsets", {begin, begin + size}}};
  }
  if (!metadata.empty())
    image.header["__metadata__"] = metadata;
  return image;
}

inline void writeFile(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

inline void writeFile(const std::string &path, const std::string &text) {
  writeFile(path, std::vector<uint8_t>(text.begin(), text.end()));
}

} // namespace llmc::test
