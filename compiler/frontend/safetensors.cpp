#include "frontend/safetensors.h"

#include "support/json.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <string_view>
#include <tuple>

namespace llmc {
namespace {

// The reference implementation (huggingface/safetensors) refuses larger
// headers; a bigger N means a corrupt or foreign file.
constexpr uint64_t kMaxHeaderSize = 100'000'000;

// Every dtype the format defines. Those outside llmc's DType are "unsupported"
// rather than "unknown", so a valid F64 or FP8 checkpoint gets the right message.
constexpr std::string_view kFormatDTypes[] = {
    "BOOL", "F4",  "F6_E2M3", "F6_E3M2", "U8",  "I8",  "F8_E5M2", "F8_E4M3", "F8_E8M0", "I16",
    "U16",  "F16", "BF16",    "I32",     "U32", "F32", "C64",     "F64",     "I64",     "U64"};

std::string supportedDTypes() {
  std::string list;
  for (int i = 0; i < kNumDTypes; ++i)
    list += (i ? ", " : "") + std::string(dtypeName(static_cast<DType>(i)));
  return list;
}

std::string tensorWhere(const std::string &file, const std::string &name) {
  return file + ": tensor '" + name + "': ";
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string offsetsString(uint64_t begin, uint64_t end) {
  return "data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

// Offset of the first byte of `s` that is not well-formed UTF-8 (overlong
// forms, surrogates and code points past U+10FFFF included), or `n`.
size_t invalidUtf8Offset(const uint8_t *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    uint8_t c = s[i];
    size_t len = 1;
    uint32_t cp = c, min = 0;
    if (c >= 0x80) {
      if ((c & 0xE0) == 0xC0)
        len = 2, cp = c & 0x1F, min = 0x80;
      else if ((c & 0xF0) == 0xE0)
        len = 3, cp = c & 0x0F, min = 0x800;
      else if ((c & 0xF8) == 0xF0)
        len = 4, cp = c & 0x07, min = 0x10000;
      else
        return i;
      if (n - i < len)
        return i;
      for (size_t k = 1; k < len; ++k) {
        if ((s[i + k] & 0xC0) != 0x80)
          return i;
        cp = (cp << 6) | (s[i + k] & 0x3F);
      }
      if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return i;
    }
    i += len;
  }
  return n;
}

// The header bytes [8, 8 + n) as a JSON object.
Expected<Json> parseHeaderJson(const uint8_t *text, uint64_t n, const std::string &file) {
  size_t bad = invalidUtf8Offset(text, n);
  if (bad != n)
    return Status::error(file + ": header is not valid UTF-8 (byte " + std::to_string(8 + bad) +
                         " of the file)");
  std::string_view view(reinterpret_cast<const char *>(text), n);
  // Trailing spaces (alignment padding) are JSON whitespace; leading ones are
  // not allowed by the format.
  LLMC_ASSIGN_OR_RETURN(Json root, parseJson(view, file + ": header"));
  if (!root.is_object() || view.front() != '{')
    return Status::error(file + ": header must be a JSON object beginning with '{', got " +
                         (root.is_object() ? "leading whitespace" : jsonTypeName(root)));
  return root;
}

Status parseMetadata(const Json &value, const std::string &file,
                     std::map<std::string, std::string> &out) {
  const std::string where = file + ": __metadata__: ";
  if (!value.is_object())
    return Status::error(where + "expected an object of string -> string, got " +
                         jsonTypeName(value));
  for (const auto &[key, v] : value.items()) {
    if (!v.is_string())
      return Status::error(where + "key '" + key + "': expected a string, got " + jsonTypeName(v));
    out[key] = v.get<std::string>();
  }
  return Status::ok();
}

// A short description of a JSON value for messages: integers by value, the
// rest by type (a hostile header may hold arbitrarily large values).
std::string describe(const Json &v) {
  if (v.is_number_integer())
    return v.dump();
  if (v.is_array())
    return "an array of " + std::to_string(v.size()) + " elements";
  return jsonTypeName(v);
}

bool isNonNegativeInt(const Json &v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0);
}

Expected<DType> parseDType(const Json &v, const std::string &where) {
  if (!v.is_string())
    return Status::error(where + "dtype: expected a string, got " + jsonTypeName(v));
  const std::string &name = v.get_ref<const std::string &>();
  if (std::optional<DType> dtype = dtypeFromName(name))
    return *dtype;
  bool known = std::find(std::begin(kFormatDTypes), std::end(kFormatDTypes), name) !=
               std::end(kFormatDTypes);
  return Status::error(where + (known ? "unsupported dtype '" : "unknown dtype '") + name +
                       "' (supported: " + supportedDTypes() + ")");
}

Expected<std::vector<int64_t>> parseShape(const Json &v, const std::string &where) {
  if (!v.is_array())
    return Status::error(where + "shape: expected an array of non-negative integers, got " +
                         jsonTypeName(v));
  std::vector<int64_t> shape;
  for (size_t i = 0; i < v.size(); ++i) {
    const Json &dim = v[i];
    if (!isNonNegativeInt(dim) || dim.get<uint64_t>() > uint64_t(INT64_MAX))
      return Status::error(where + "shape: dimension " + std::to_string(i) +
                           ": expected a non-negative integer below 2^63, got " + describe(dim));
    shape.push_back(dim.get<int64_t>());
  }
  return shape;
}

Status parseOffsets(const Json &v, const std::string &where, SafetensorsHeader::Entry &entry) {
  if (!v.is_array() || v.size() != 2)
    return Status::error(where + "data_offsets: expected [begin, end], got " + describe(v));
  for (const Json &offset : v)
    if (!isNonNegativeInt(offset))
      return Status::error(where + "data_offsets: expected non-negative integers, got " +
                           describe(offset));
  entry.begin = v[0].get<uint64_t>();
  entry.end = v[1].get<uint64_t>();
  if (entry.begin > entry.end)
    return Status::error(where + offsetsString(entry.begin, entry.end) + ": begin > end");
  return Status::ok();
}

// prod(shape) * dtype size must equal end - begin. Like the reference
// implementation, any overflow is an error, even one a later 0 dim would cancel.
Status checkByteSize(const SafetensorsHeader::Entry &e, const std::string &where) {
  const std::string what =
      "shape " + shapeString(e.shape) + " x " + std::string(dtypeName(e.dtype));
  uint64_t elements = 1, bytes = 0;
  for (int64_t dim : e.shape)
    if (__builtin_mul_overflow(elements, uint64_t(dim), &elements))
      return Status::error(where + what + " overflows a 64-bit element count");
  if (__builtin_mul_overflow(elements, uint64_t(dtypeSize(e.dtype)), &bytes))
    return Status::error(where + what + " overflows a 64-bit byte count");
  if (bytes != e.end - e.begin)
    return Status::error(where + what + " needs " + std::to_string(bytes) + " bytes but " +
                         offsetsString(e.begin, e.end) + " span " +
                         std::to_string(e.end - e.begin));
  return Status::ok();
}

Expected<SafetensorsHeader::Entry> parseEntry(const std::string &name, const Json &value,
                                              const std::string &file) {
  const std::string where = tensorWhere(file, name);
  if (!value.is_object())
    return Status::error(where + "expected an object {dtype, shape, data_offsets}, got " +
                         jsonTypeName(value));
  for (const auto &item : value.items())
    if (item.key() != "dtype" && item.key() != "shape" && item.key() != "data_offsets")
      return Status::error(where + "unknown key '" + item.key() +
                           "' (expected dtype, shape, data_offsets)");
  for (const char *key : {"dtype", "shape", "data_offsets"})
    if (!value.contains(key))
      return Status::error(where + "missing key '" + key + "'");
  SafetensorsHeader::Entry entry;
  entry.name = name;
  LLMC_ASSIGN_OR_RETURN(entry.dtype, parseDType(value["dtype"], where));
  LLMC_ASSIGN_OR_RETURN(entry.shape, parseShape(value["shape"], where));
  LLMC_RETURN_IF_ERROR(parseOffsets(value["data_offsets"], where, entry));
  LLMC_RETURN_IF_ERROR(checkByteSize(entry, where));
  return entry;
}

// `tensors` sorted by begin: they must tile [0, dataSize) with no hole or overlap.
Status checkLayout(const std::vector<SafetensorsHeader::Entry> &tensors, uint64_t dataSize,
                   const std::string &file) {
  uint64_t covered = 0;
  const SafetensorsHeader::Entry *prev = nullptr;
  for (const auto &e : tensors) {
    const std::string where = tensorWhere(file, e.name) + offsetsString(e.begin, e.end);
    if (e.begin != covered && prev == nullptr)
      return Status::error(where + ": the first tensor must begin at offset 0 of the data buffer");
    if (e.begin > covered)
      return Status::error(where + " leave a hole of " + std::to_string(e.begin - covered) +
                           " bytes after tensor '" + prev->name + "' (" +
                           offsetsString(prev->begin, prev->end) + ")");
    if (e.begin < covered)
      return Status::error(where + " overlap tensor '" + prev->name + "' (" +
                           offsetsString(prev->begin, prev->end) + ")");
    covered = e.end;
    prev = &e;
  }
  if (covered > dataSize)
    return Status::error(tensorWhere(file, prev->name) + offsetsString(prev->begin, prev->end) +
                         " end past the data buffer of " + std::to_string(dataSize) +
                         " bytes (file truncated?)");
  if (covered < dataSize)
    return Status::error(file + ": " + std::to_string(dataSize - covered) +
                         " trailing bytes in the data buffer after " +
                         (prev ? "the last tensor '" + prev->name + "'" : "an empty header") +
                         ": the tensors cover " + std::to_string(covered) + " of " +
                         std::to_string(dataSize) + " bytes");
  return Status::ok();
}

} // namespace

Expected<SafetensorsHeader> parseSafetensors(const uint8_t *bytes, uint64_t size,
                                             const std::string &fileName) {
  if (size < 8)
    return Status::error(fileName + ": file is " + std::to_string(size) +
                         " bytes, shorter than the 8-byte header length (not a safetensors file?)");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i)
    n = (n << 8) | bytes[i];
  if (n > kMaxHeaderSize)
    return Status::error(fileName + ": header length " + std::to_string(n) + " exceeds the " +
                         std::to_string(kMaxHeaderSize) + "-byte limit (not a safetensors file?)");
  if (n > size - 8)
    return Status::error(fileName + ": header length " + std::to_string(n) + " needs " +
                         std::to_string(8 + n) + " bytes but the file has " + std::to_string(size) +
                         " (file truncated?)");
  LLMC_ASSIGN_OR_RETURN(Json root, parseHeaderJson(bytes + 8, n, fileName));

  SafetensorsHeader header;
  header.headerSize = n;
  for (const auto &item : root.items()) {
    if (item.key() == "__metadata__") {
      LLMC_RETURN_IF_ERROR(parseMetadata(item.value(), fileName, header.metadata));
      continue;
    }
    LLMC_ASSIGN_OR_RETURN(auto entry, parseEntry(item.key(), item.value(), fileName));
    header.tensors.push_back(std::move(entry));
  }
  std::sort(header.tensors.begin(), header.tensors.end(), [](const auto &a, const auto &b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  LLMC_RETURN_IF_ERROR(checkLayout(header.tensors, size - 8 - n, fileName));
  return header;
}

Expected<SafetensorsFile> SafetensorsFile::open(const std::string &path) {
  LLMC_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::open(path));
  LLMC_ASSIGN_OR_RETURN(SafetensorsHeader header,
                        parseSafetensors(mapped.data(), mapped.size(), path));
  SafetensorsFile file;
  const uint8_t *dataBuffer = mapped.data() + 8 + header.headerSize;
  for (const auto &e : header.tensors)
    file.tensors_.push_back(
        {e.name, e.dtype, e.shape, dataBuffer + e.begin, e.end - e.begin, path});
  file.file_ = std::move(mapped);
  file.header_ = std::move(header);
  return file;
}

Status WeightSet::add(SafetensorsFile file) {
  for (const TensorView &view : file.tensors()) {
    auto [it, inserted] = byName_.emplace(view.name, view);
    if (!inserted)
      return Status::error("tensor '" + view.name + "' is in both " + it->second.file + " and " +
                           view.file);
  }
  // Moving the file keeps its mapping (and so every TensorView::data) in place.
  files_.push_back(std::move(file));
  return Status::ok();
}

Expected<WeightSet> WeightSet::openFiles(const std::vector<std::string> &paths) {
  if (paths.empty())
    return Status::error("no .safetensors files given");
  WeightSet set;
  for (const std::string &path : paths) {
    LLMC_ASSIGN_OR_RETURN(SafetensorsFile file, SafetensorsFile::open(path));
    LLMC_RETURN_IF_ERROR(set.add(std::move(file)));
  }
  return set;
}

namespace {

// weight_map of an index file: tensor name -> shard path resolved against the
// index's folder.
Expected<std::map<std::string, std::string>> readWeightMap(const std::string &indexPath) {
  LLMC_ASSIGN_OR_RETURN(std::string text, readTextFile(indexPath));
  LLMC_ASSIGN_OR_RETURN(Json root, parseJson(text, indexPath));
  const Json *map = findField(root, "weight_map");
  if (map == nullptr || !map->is_object() || map->empty())
    return Status::error(indexPath + ": field 'weight_map': expected a non-empty object of "
                                     "tensor name -> shard file");
  const Json *metadata = findField(root, "metadata");
  if (metadata != nullptr && !metadata->is_object() && !metadata->is_null())
    return Status::error(indexPath + ": field 'metadata': expected an object, got " +
                         jsonTypeName(*metadata));
  const std::filesystem::path folder = std::filesystem::path(indexPath).parent_path();
  std::map<std::string, std::string> shardOf;
  for (const auto &[tensor, shard] : map->items()) {
    if (!shard.is_string() || shard.get_ref<const std::string &>().empty() ||
        std::filesystem::path(shard.get<std::string>()).is_absolute())
      return Status::error(indexPath + ": weight_map: tensor '" + tensor +
                           "': expected a shard file name relative to the index's folder");
    // Normalized, so "./a.safetensors" and "a.safetensors" are one shard.
    shardOf[tensor] = (folder / shard.get<std::string>()).lexically_normal().string();
  }
  return shardOf;
}

} // namespace

Expected<WeightSet> WeightSet::openIndex(const std::string &indexJsonPath) {
  LLMC_ASSIGN_OR_RETURN(auto shardOf, readWeightMap(indexJsonPath));
  WeightSet set;
  std::set<std::string> opened;
  for (const auto &[tensor, shard] : shardOf) {
    if (!opened.insert(shard).second)
      continue;
    Expected<SafetensorsFile> file = SafetensorsFile::open(shard);
    if (!file)
      return file.status().withContext(indexJsonPath + ": shard of tensor '" + tensor + "'");
    LLMC_RETURN_IF_ERROR(set.add(std::move(*file)));
  }
  for (const auto &[tensor, shard] : shardOf) {
    const TensorView *view = set.find(tensor);
    if (view == nullptr || view->file != shard)
      return Status::error(indexJsonPath + ": weight_map: tensor '" + tensor + "' is mapped to " +
                           shard + " but " +
                           (view ? "is stored in " + view->file : "no shard contains it"));
  }
  for (const auto &[name, view] : set.byName_)
    if (shardOf.count(name) == 0)
      return Status::error(view.file + ": tensor '" + name +
                           "' is not listed in the weight_map of " + indexJsonPath);
  return set;
}

Status WeightSet::addDerived(TensorView view, std::vector<uint8_t> bytes) {
  if (byName_.count(view.name))
    return Status::error("tensor '" + view.name + "' is already in the checkpoint (" +
                         byName_.at(view.name).file + "); it cannot also be derived");
  derived_.push_back(std::make_unique<std::vector<uint8_t>>(std::move(bytes)));
  view.data = derived_.back()->data();
  view.byteSize = derived_.back()->size();
  std::string name = view.name;
  byName_.emplace(std::move(name), std::move(view));
  return Status::ok();
}

Status WeightSet::addAlias(TensorView view) {
  if (byName_.count(view.name))
    return Status::error("tensor '" + view.name + "' is already in the checkpoint (" +
                         byName_.at(view.name).file + "); it cannot also be derived");
  std::string name = view.name;
  byName_.emplace(std::move(name), std::move(view));
  return Status::ok();
}

const TensorView *WeightSet::find(const std::string &name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? nullptr : &it->second;
}

uint64_t WeightSet::totalBytes() const {
  uint64_t total = 0;
  for (const auto &[name, view] : byName_)
    total += view.byteSize;
  return total;
}

} // namespace llmc
