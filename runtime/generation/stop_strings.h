// Stop strings over streamed text, with the OpenAI / vLLM semantics: the
// output ends right before the first stop string that appears, which is not
// part of the output; text that could be the start of a stop string is held
// back until it is known not to be one.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace llmc::generation {

class StopStrings {
public:
  // Empty strings are ignored (they would match everywhere).
  explicit StopStrings(std::vector<std::string> stops = {});

  struct Piece {
    std::string text;     // what can be shown now (complete UTF-8 when the input is)
    bool stopped = false; // a stop string completed: `text` ends right before it
  };

  // Adds streamed text. While `mayStop` is false (min_tokens not reached) no
  // stop string ends the output, but a possible start is still held back, so
  // a stop string that completes later is found whole. After a stop, every
  // later push returns nothing.
  Piece push(std::string_view text, bool mayStop = true);
  // The text held back at the end of the stream (no stop string follows).
  std::string flush();

  bool empty() const { return stops_.empty(); }
  bool stopped() const { return stopped_; }
  // The stop string that ended the output (empty before that).
  const std::string &matched() const { return matched_; }

private:
  size_t heldBackLength() const;

  std::vector<std::string> stops_;
  std::string pending_; // text not shown yet: a possible start of a stop string
  bool stopped_ = false;
  std::string matched_;
};

} // namespace llmc::generation
