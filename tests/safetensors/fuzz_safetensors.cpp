// libFuzzer target: parseSafetensors on arbitrary bytes. Besides memory
// errors (ASan/UBSan), it traps when an accepted header breaks an invariant
// the reader promises its users.
#include "frontend/safetensors.h"

#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llmc::Expected<llmc::SafetensorsHeader> header =
      llmc::parseSafetensors(data, size, "fuzz.safetensors");
  if (!header) {
    if (header.message().rfind("fuzz.safetensors: ", 0) != 0)
      std::abort(); // every error must name the file
    return 0;
  }
  // Accepted: the tensors tile the data buffer [0, size - 8 - N) in order.
  uint64_t covered = 0;
  for (const auto &entry : header->tensors) {
    if (entry.begin != covered || entry.end < entry.begin)
      std::abort();
    covered = entry.end;
  }
  if (covered != size - 8 - header->headerSize)
    std::abort();
  return 0;
}
