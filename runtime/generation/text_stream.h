// The text of one generated sequence, as it streams: what the generated ids
// add to the prompt's text, i.e. decode(prompt + generated) minus
// decode(prompt), emitted piece by piece in complete UTF-8, then cut at the
// first stop string. The same object serves `llmrun` and the server.
//
// A SentencePiece decoder strips the space before the first word of a
// decode; decoding the generated ids on their own would drop the space
// before the first generated word ("Once upon a" + "atime"). So the stream
// starts with the end of the prompt as its context (a few tokens: decoding
// is local past them, and each step stays short).
#pragma once

#include "generation/stop_strings.h"
#include "tokenizer/tokenizer.h"

#include <cstdint>
#include <string>
#include <vector>

namespace llmc::generation {

class TextStream {
public:
  // skipSpecialTokens: leave special tokens out of the text (vLLM's default).
  TextStream(Tokenizer tokenizer, const std::vector<int32_t> &prompt,
             std::vector<std::string> stopStrings = {}, bool skipSpecialTokens = true);

  struct Update {
    std::string text;     // newly visible text (often empty)
    bool stopped = false; // a stop string completed; nothing follows
  };

  // Adds one generated id. mayStop: whether a stop string may end the output
  // yet (false before min_tokens tokens).
  Update push(int32_t id, bool mayStop = true);
  // At the end of generation: the text still held back (an incomplete
  // character as U+FFFD, the start of a stop string that never completed).
  std::string finish();

  // Everything made visible so far.
  const std::string &text() const { return text_; }
  bool stopped() const { return stops_.stopped(); }
  const std::string &matchedStop() const { return stops_.matched(); }

private:
  StreamDecoder decoder_;
  StopStrings stops_;
  std::string text_;
  bool finished_ = false;
};

// The prompt ids a stream starts from: the last few, moved back while their
// text starts inside a character (a UTF-8 sequence split across tokens).
std::vector<int32_t> promptContext(const Tokenizer &tokenizer, const std::vector<int32_t> &prompt,
                                   bool skipSpecialTokens);

} // namespace llmc::generation
