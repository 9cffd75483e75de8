// A read-only memory mapping of a whole file: plans, their metadata and
// weights are read from it (the CPU backend copies the weights it streams
// onto 2 MiB pages; cpu/backend/loaded_weights.h).
#pragma once

#include "support/status.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace llmc {

class MappedFile {
public:
  MappedFile() = default;
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  MappedFile(MappedFile &&other) noexcept;
  MappedFile &operator=(MappedFile &&other) noexcept;
  ~MappedFile();

  // Maps `path` read-only. An empty file maps to size() == 0, data() == nullptr.
  // Anything but a regular file (a FIFO, a device, a directory) is refused
  // without blocking, with an error naming the path and what it is.
  static Expected<MappedFile> open(const std::string &path);

  const uint8_t *data() const { return data_; }
  size_t size() const { return size_; }
  const std::string &path() const { return path_; }

  // Gives back the resident pages wholly inside [data, data + bytes), a
  // range of this mapping that the process no longer reads (a tensor held
  // in another layout): they leave the process's memory, and a later read
  // maps them from the file again. No-op outside the mapping. Returns the
  // bytes given back (whole pages).
  size_t releasePages(const void *data, size_t bytes) const;

private:
  void reset();

  std::string path_;
  const uint8_t *data_ = nullptr;
  size_t size_ = 0;
};

// Reads a whole (small) text file, e.g. a config.json or tokenizer.json.
Expected<std::string> readTextFile(const std::string &path);

} // namespace llmc
