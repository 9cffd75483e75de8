#include "plan_writer.h"

#include "kernels/common/half.h"
#include "plan/plan_format.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace llmc {
namespace {

using File = std::unique_ptr<FILE, int (*)(FILE *)>;

// Lays out the weight section: each stored tensor at the next aligned offset.
uint64_t layoutTensors(PlanContents &contents) {
  uint64_t offset = 0;
  for (size_t i = 0; i < contents.meta.tensors.size(); ++i) {
    fb::TensorT &t = *contents.meta.tensors[i];
    const WeightSource &src = contents.sources[i];
    t.size = src.elements * dtypeSize(static_cast<DType>(t.dtype));
    if (src.data == nullptr && src.parts.empty()) {
      t.offset = 0;
      continue;
    }
    offset = alignUp(offset, kPlanWeightAlignment);
    t.offset = offset;
    offset += t.size;
  }
  return alignUp(offset, kPlanWeightAlignment);
}

Status writeAll(FILE *f, const void *data, size_t size, const std::string &path) {
  if (size > 0 && std::fwrite(data, 1, size, f) != size)
    return Status::error(path + ": write failed: " + std::strerror(errno));
  return Status::ok();
}

// Streams the stored tensors in chunks, converting dtypes, hashing as it goes.
Status writeWeights(FILE *f, const PlanContents &contents, uint64_t sectionSize,
                    const std::string &path, const WriteProgress &progress, uint64_t *checksum) {
  constexpr uint64_t kChunkElements = 1 << 20;
  std::vector<uint8_t> chunk(kChunkElements * 4);
  WeightChecksum hash;
  uint64_t written = 0;
  auto pad = [&](uint64_t to) -> Status {
    static const uint8_t zeros[kPlanWeightAlignment] = {};
    while (written < to) {
      uint64_t n = std::min<uint64_t>(to - written, sizeof(zeros));
      LLMC_RETURN_IF_ERROR(writeAll(f, zeros, n, path));
      hash.update(zeros, n);
      written += n;
    }
    return Status::ok();
  };
  // One stored source (or one part of a concatenated tensor), in chunks.
  auto writeSource = [&](const WeightSource &src, DType dst, const std::string &name) -> Status {
    for (uint64_t done = 0; done < src.elements; done += kChunkElements) {
      uint64_t n = std::min(kChunkElements, src.elements - done);
      LLMC_RETURN_IF_ERROR(
          convertElements(src.data + done * dtypeSize(src.dtype), src.dtype, chunk.data(), dst, n)
              .withContext("tensor '" + name + "'"));
      LLMC_RETURN_IF_ERROR(writeAll(f, chunk.data(), n * dtypeSize(dst), path));
      hash.update(chunk.data(), n * dtypeSize(dst));
      written += n * dtypeSize(dst);
      if (progress)
        progress(written, sectionSize);
    }
    return Status::ok();
  };
  for (size_t i = 0; i < contents.meta.tensors.size(); ++i) {
    const fb::TensorT &t = *contents.meta.tensors[i];
    const WeightSource &src = contents.sources[i];
    if (src.data == nullptr && src.parts.empty())
      continue;
    LLMC_RETURN_IF_ERROR(pad(t.offset));
    DType dst = static_cast<DType>(t.dtype);
    if (src.parts.empty())
      LLMC_RETURN_IF_ERROR(writeSource(src, dst, t.name));
    for (const WeightSource &part : src.parts)
      LLMC_RETURN_IF_ERROR(writeSource(part, dst, t.name));
  }
  LLMC_RETURN_IF_ERROR(pad(sectionSize));
  *checksum = hash.finish();
  return Status::ok();
}

} // namespace

Status convertElements(const uint8_t *src, DType srcType, uint8_t *dst, DType dstType,
                       uint64_t count) {
  if (srcType == dstType) {
    std::memcpy(dst, src, count * dtypeSize(srcType));
    return Status::ok();
  }
  auto isFloat = [](DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; };
  if (!isFloat(srcType) || !isFloat(dstType))
    return Status::error("cannot convert " + std::string(dtypeName(srcType)) + " to " +
                         std::string(dtypeName(dstType)));
  for (uint64_t i = 0; i < count; ++i) {
    float value = 0.0f;
    switch (srcType) {
    case DType::F32:
      std::memcpy(&value, src + 4 * i, 4);
      break;
    case DType::F16:
      value = hd::f16ToF32(reinterpret_cast<const uint16_t *>(src)[i]);
      break;
    default:
      value = hd::bf16ToF32(reinterpret_cast<const uint16_t *>(src)[i]);
      break;
    }
    switch (dstType) {
    case DType::F32:
      std::memcpy(dst + 4 * i, &value, 4);
      break;
    case DType::F16:
      reinterpret_cast<uint16_t *>(dst)[i] = hd::f32ToF16(value);
      break;
    default:
      reinterpret_cast<uint16_t *>(dst)[i] = hd::f32ToBf16(value);
      break;
    }
  }
  return Status::ok();
}

Expected<WriteSummary> writePlan(const std::string &path, PlanContents &contents,
                                 const WriteProgress &progress) {
  if (contents.sources.size() != contents.meta.tensors.size())
    return Status::error("internal: plan has " + std::to_string(contents.meta.tensors.size()) +
                         " tensors but " + std::to_string(contents.sources.size()) + " sources");
  uint64_t weightsSize = layoutTensors(contents);
  flatbuffers::FlatBufferBuilder builder(1 << 16);
  builder.Finish(fb::Plan::Pack(builder, &contents.meta), fb::PlanIdentifier());

  PlanFileHeader header{};
  std::memcpy(header.magic, kPlanMagic, sizeof(kPlanMagic));
  header.formatVersion = kPlanFormatVersion;
  header.headerSize = sizeof(PlanFileHeader);
  header.metadataOffset = sizeof(PlanFileHeader);
  header.metadataSize = builder.GetSize();
  header.weightsOffset = alignUp(header.metadataOffset + header.metadataSize, 4096);
  header.weightsSize = weightsSize;
  header.metadataChecksum = fnv1a64(builder.GetBufferPointer(), builder.GetSize());

  std::string tmpPath = path + ".partial";
  File f(std::fopen(tmpPath.c_str(), "wb"), std::fclose);
  if (!f)
    return Status::error(path + ": cannot create: " + std::strerror(errno));
  std::vector<uint8_t> gap(header.weightsOffset - header.metadataOffset - header.metadataSize);
  Status status = writeAll(f.get(), &header, sizeof(header), path);
  if (status)
    status = writeAll(f.get(), builder.GetBufferPointer(), builder.GetSize(), path);
  if (status)
    status = writeAll(f.get(), gap.data(), gap.size(), path);
  if (status)
    status = writeWeights(f.get(), contents, weightsSize, path, progress, &header.weightsChecksum);
  if (status && (std::fseek(f.get(), 0, SEEK_SET) != 0 ||
                 std::fwrite(&header, sizeof(header), 1, f.get()) != 1))
    status = Status::error(path + ": cannot rewrite the header: " + std::strerror(errno));
  if (status && std::fflush(f.get()) != 0)
    status = Status::error(path + ": write failed: " + std::strerror(errno));
  f.reset();
  if (status && std::rename(tmpPath.c_str(), path.c_str()) != 0)
    status = Status::error(path + ": cannot rename from " + tmpPath + ": " + std::strerror(errno));
  if (!status) {
    std::remove(tmpPath.c_str());
    return status;
  }
  WriteSummary summary;
  summary.metadataSize = header.metadataSize;
  summary.weightsSize = header.weightsSize;
  summary.fileSize = header.weightsOffset + header.weightsSize;
  return summary;
}

} // namespace llmc
