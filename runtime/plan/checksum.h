// The plan's weight-section checksum: XXH3-64 (xxHash, Debian libxxhash-dev)
// over the section's bytes, at memory speed (about 4x faster than the FNV-1a
// over 64-bit words of format version 1; docs/perf.md has the figures). A
// fast strong non-cryptographic hash: it catches corruption and truncation,
// not an adversary. The writer hashes while it streams (update() in any
// chunking gives the value of one call); the loader hashes the mapped file.
#pragma once

#include <cstdint>
#include <memory>

struct XXH3_state_s; // xxhash.h, kept out of this header

namespace llmc {

// XXH3-64 of `size` bytes, seed 0.
uint64_t planWeightChecksum(const uint8_t *data, uint64_t size);

class PlanWeightHasher {
public:
  PlanWeightHasher();
  ~PlanWeightHasher();
  PlanWeightHasher(const PlanWeightHasher &) = delete;
  PlanWeightHasher &operator=(const PlanWeightHasher &) = delete;

  void update(const uint8_t *data, uint64_t size);
  // The checksum of everything given so far (more may follow).
  uint64_t finish() const;

private:
  struct Free {
    void operator()(XXH3_state_s *state) const;
  };
  std::unique_ptr<XXH3_state_s, Free> state_;
};

} // namespace llmc
