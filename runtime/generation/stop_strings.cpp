#include "generation/stop_strings.h"

#include <algorithm>

namespace llmc::generation {

StopStrings::StopStrings(std::vector<std::string> stops) {
  for (std::string &stop : stops)
    if (!stop.empty())
      stops_.push_back(std::move(stop));
}

// The longest suffix of pending_ that is a proper prefix of a stop string:
// it may still grow into one. Such a suffix starts where a stop string
// starts, at a character boundary, so what is shown stays complete UTF-8.
size_t StopStrings::heldBackLength() const {
  size_t longest = 0;
  for (const std::string &stop : stops_) {
    size_t most = std::min(stop.size() - 1, pending_.size());
    for (size_t n = most; n > longest; --n)
      if (pending_.compare(pending_.size() - n, n, stop, 0, n) == 0) {
        longest = n;
        break;
      }
  }
  return longest;
}

StopStrings::Piece StopStrings::push(std::string_view text, bool mayStop) {
  Piece piece;
  if (stopped_)
    return piece;
  pending_.append(text);
  if (mayStop) {
    // The stop string that starts first wins; at the same start, the longest.
    size_t first = std::string::npos;
    const std::string *which = nullptr;
    for (const std::string &stop : stops_) {
      size_t at = pending_.find(stop);
      if (at != std::string::npos &&
          (at < first || (at == first && stop.size() > which->size()))) {
        first = at;
        which = &stop;
      }
    }
    if (which != nullptr) {
      piece.text = pending_.substr(0, first);
      piece.stopped = true;
      stopped_ = true;
      matched_ = *which;
      pending_.clear();
      return piece;
    }
  }
  const size_t held = heldBackLength();
  piece.text = pending_.substr(0, pending_.size() - held);
  pending_.erase(0, pending_.size() - held);
  return piece;
}

std::string StopStrings::flush() {
  std::string rest;
  rest.swap(pending_);
  return stopped_ ? std::string() : rest;
}

} // namespace llmc::generation
