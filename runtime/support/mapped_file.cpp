#include "support/mapped_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace llmc {

MappedFile::MappedFile(MappedFile &&other) noexcept { *this = std::move(other); }

MappedFile &MappedFile::operator=(MappedFile &&other) noexcept {
  if (this != &other) {
    reset();
    path_ = std::move(other.path_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

MappedFile::~MappedFile() { reset(); }

void MappedFile::reset() {
  if (data_ != nullptr)
    munmap(const_cast<uint8_t *>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

namespace {

// What a non-regular file is, for the error message.
const char *fileTypeName(mode_t mode) {
  if (S_ISFIFO(mode))
    return "a FIFO (named pipe)";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISDIR(mode))
    return "a directory";
  return "a special file";
}

} // namespace

Expected<MappedFile> MappedFile::open(const std::string &path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
  // forever. Regular files ignore the flag; everything else is refused below.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0)
    return Status::error(path + ": cannot open: " + std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return Status::error(path + ": cannot stat: " + std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::error(path + ": is " + fileTypeName(st.st_mode) +
                         ", not a regular file; give the path of a file on disk");
  }
  MappedFile file;
  file.path_ = path;
  file.size_ = static_cast<size_t>(st.st_size);
  if (file.size_ > 0) {
    void *addr = mmap(nullptr, file.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (addr == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      file.size_ = 0;
      return Status::error(path + ": cannot mmap: " + std::strerror(err));
    }
    file.data_ = static_cast<const uint8_t *>(addr);
  }
  ::close(fd);
  return file;
}

size_t MappedFile::releasePages(const void *data, size_t bytes) const {
  const auto *begin = static_cast<const uint8_t *>(data);
  if (data_ == nullptr || begin < data_ || bytes > size_ ||
      begin - data_ > static_cast<ptrdiff_t>(size_ - bytes))
    return 0;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t first = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(begin) + bytes) / page * page;
  // A private read-only file mapping: the file backs the pages again.
  if (first >= last || madvise(reinterpret_cast<void *>(first), last - first, MADV_DONTNEED) != 0)
    return 0;
  return last - first;
}

Expected<std::string> readTextFile(const std::string &path) {
  LLMC_ASSIGN_OR_RETURN(MappedFile file, MappedFile::open(path));
  return std::string(reinterpret_cast<const char *>(file.data()), file.size());
}

} // namespace llmc
