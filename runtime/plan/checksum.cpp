#include "plan/checksum.h"

#include <new>

#include <xxhash.h>

namespace llmc {

uint64_t planWeightChecksum(const uint8_t *data, uint64_t size) {
  return XXH3_64bits(data, static_cast<size_t>(size));
}

void PlanWeightHasher::Free::operator()(XXH3_state_s *state) const { XXH3_freeState(state); }

PlanWeightHasher::PlanWeightHasher() : state_(XXH3_createState()) {
  if (state_ == nullptr)
    throw std::bad_alloc();
  XXH3_64bits_reset(state_.get());
}

PlanWeightHasher::~PlanWeightHasher() = default;

void PlanWeightHasher::update(const uint8_t *data, uint64_t size) {
  XXH3_64bits_update(state_.get(), data, static_cast<size_t>(size));
}

uint64_t PlanWeightHasher::finish() const { return XXH3_64bits_digest(state_.get()); }

} // namespace llmc
