// Switches read from the environment (LLMC_CPU_CODED_BF16=0 and the like).
#pragma once

#include <cstdlib>
#include <cstring>

namespace llmc {

// Whether the switch `name` is on: on unless the environment sets it to "0".
inline bool envSwitchOn(const char *name) {
  const char *value = std::getenv(name);
  return value == nullptr || std::strcmp(value, "0") != 0;
}

} // namespace llmc
