#include "plan_writer.h"

#include "kernels/common/half.h"
#include "plan/checksum.h"
#include "plan/plan_format.h"

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

namespace llmc {
namespace {

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
  PlanWeightHasher hash;
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

// The temporary file being written, for the signal handler: a fixed buffer
// (no allocation in the handler) and a flag set once the path is complete.
char gTemporaryPath[4096];
volatile std::sig_atomic_t gTemporaryArmed = 0;
struct sigaction gPreviousActions[2];
bool gInstalled[2] = {false, false}; // not where the signal was ignored (nohup)
constexpr int kCleanupSignals[2] = {SIGINT, SIGTERM};

// SIGINT/SIGTERM while a plan is written: remove the temporary file, then die
// of the signal as before (only async-signal-safe calls: unlink, sigaction,
// raise).
void removeTemporaryAndReraise(int signal) {
  if (gTemporaryArmed)
    ::unlink(gTemporaryPath);
  gTemporaryArmed = 0;
  for (size_t i = 0; i < 2; ++i)
    if (kCleanupSignals[i] == signal)
      ::sigaction(signal, &gPreviousActions[i], nullptr);
  ::raise(signal);
}

} // namespace

Expected<TemporaryPlanFile> TemporaryPlanFile::create(const std::string &path) {
  namespace fs = std::filesystem;
  fs::path target(path);
  if (target.filename().empty())
    return Status::error(path + ": the output must name a file, not a folder");
  std::error_code ec;
  if (fs::is_directory(target, ec))
    return Status::error(path + ": is a folder; pass the plan file's name, e.g. " +
                         (target / "engine.plan").string());
  fs::path folder = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  // "<dir>/.<name>.<pid>-<n>.partial", created exclusively, never through a
  // link: a file or symlink planted at the name makes open fail (EEXIST or
  // ELOOP), and we try the next name.
  static std::atomic<uint64_t> counter{0};
  std::random_device random;
  for (int attempt = 0; attempt < 100; ++attempt) {
    char suffix[64];
    std::snprintf(suffix, sizeof(suffix), ".%ld-%llx.partial", static_cast<long>(::getpid()),
                  static_cast<unsigned long long>((uint64_t(random()) << 16) ^ counter++));
    std::string name = (folder / ("." + target.filename().string() + suffix)).string();
    int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && (errno == EEXIST || errno == ELOOP))
      continue;
    if (fd < 0)
      return Status::error(path + ": cannot create a temporary file in " + folder.string() + ": " +
                           std::strerror(errno));
    FILE *file = ::fdopen(fd, "wb");
    if (file == nullptr) {
      int error = errno;
      ::close(fd);
      ::unlink(name.c_str());
      return Status::error(path + ": cannot open " + name + ": " + std::strerror(error));
    }
    return TemporaryPlanFile(path, name, file);
  }
  return Status::error(path + ": cannot create a temporary file in " + folder.string() +
                       ": 100 names taken");
}

TemporaryPlanFile::TemporaryPlanFile(std::string target, std::string temporary, FILE *file)
    : target_(std::move(target)), temporary_(std::move(temporary)), file_(file) {
  arm();
}

TemporaryPlanFile::TemporaryPlanFile(TemporaryPlanFile &&other) noexcept
    : target_(std::move(other.target_)), temporary_(std::move(other.temporary_)),
      file_(other.file_), armed_(other.armed_), registered_(other.registered_) {
  other.file_ = nullptr;
  other.armed_ = false;
  other.registered_ = false;
}

TemporaryPlanFile::~TemporaryPlanFile() {
  if (file_ != nullptr)
    std::fclose(file_);
  if (armed_) {
    ::unlink(temporary_.c_str());
    disarm();
  }
}

// One plan at a time per process registers with the handler; a second one
// (not done by llmc) is still removed on failure, just not on a signal.
void TemporaryPlanFile::arm() {
  if (gTemporaryArmed || temporary_.size() >= sizeof(gTemporaryPath)) {
    armed_ = true;
    return;
  }
  std::memcpy(gTemporaryPath, temporary_.c_str(), temporary_.size() + 1);
  struct sigaction action {};
  action.sa_handler = removeTemporaryAndReraise;
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < 2; ++i)
    gInstalled[i] = ::sigaction(kCleanupSignals[i], nullptr, &gPreviousActions[i]) == 0 &&
                    gPreviousActions[i].sa_handler != SIG_IGN &&
                    ::sigaction(kCleanupSignals[i], &action, nullptr) == 0;
  gTemporaryArmed = 1;
  armed_ = true;
  registered_ = true;
}

void TemporaryPlanFile::disarm() {
  armed_ = false;
  if (!registered_)
    return;
  gTemporaryArmed = 0;
  for (size_t i = 0; i < 2; ++i)
    if (gInstalled[i])
      ::sigaction(kCleanupSignals[i], &gPreviousActions[i], nullptr);
  registered_ = false;
}

Status TemporaryPlanFile::commit() {
  auto fail = [&](const std::string &what) {
    return Status::error(target_ + ": " + what + ": " + std::strerror(errno));
  };
  if (std::fflush(file_) != 0)
    return fail("write failed");
  if (::fsync(::fileno(file_)) != 0)
    return fail("write failed (fsync)");
  FILE *file = file_;
  file_ = nullptr;
  if (std::fclose(file) != 0)
    return fail("write failed (close)");
  if (std::rename(temporary_.c_str(), target_.c_str()) != 0)
    return fail("cannot rename " + temporary_ + " onto it");
  disarm(); // renamed: nothing left to remove
  return Status::ok();
}

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

  LLMC_ASSIGN_OR_RETURN(TemporaryPlanFile tmp, TemporaryPlanFile::create(path));
  std::vector<uint8_t> gap(header.weightsOffset - header.metadataOffset - header.metadataSize);
  FILE *f = tmp.file();
  Status status = writeAll(f, &header, sizeof(header), path);
  if (status)
    status = writeAll(f, builder.GetBufferPointer(), builder.GetSize(), path);
  if (status)
    status = writeAll(f, gap.data(), gap.size(), path);
  if (status)
    status = writeWeights(f, contents, weightsSize, path, progress, &header.weightsChecksum);
  if (status &&
      (std::fseek(f, 0, SEEK_SET) != 0 || std::fwrite(&header, sizeof(header), 1, f) != 1))
    status = Status::error(path + ": cannot rewrite the header: " + std::strerror(errno));
  if (status)
    status = tmp.commit(); // flush, fsync, rename onto `path`
  if (!status)
    return status; // ~TemporaryPlanFile removes the temporary file
  WriteSummary summary;
  summary.metadataSize = header.metadataSize;
  summary.weightsSize = header.weightsSize;
  summary.fileSize = header.weightsOffset + header.weightsSize;
  return summary;
}

} // namespace llmc
