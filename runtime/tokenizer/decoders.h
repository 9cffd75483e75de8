// tokenizer.json "decoder": turns the token strings of some ids back into
// text. Supported: ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace,
// WordPiece ("##" continuations, cleanup), BPEDecoder (end-of-word suffix)
// and Sequence of them, each with Hugging Face's semantics (e.g. ByteFallback
// writes one U+FFFD per byte of an invalid <0xXX> run; ByteLevel repairs
// invalid UTF-8 with the maximal-subpart rule). Without a decoder the tokens
// are joined with spaces, as Hugging Face does.
#pragma once

#include "tokenizer/json_path.h"
#include "tokenizer/regex.h"

#include <string>
#include <vector>

namespace llmc::tok {

class Decoder {
public:
  // `value` is the "decoder" field (null: join with spaces).
  static Expected<Decoder> fromJson(const Json &value, const JsonPath &at);

  // Fails only on a Replace regex that PCRE2 gives up on, or that would
  // grow a token beyond the bound of limits.h.
  Expected<std::string> decode(std::vector<std::string> tokens) const;

private:
  enum class Kind { ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace, WordPiece, BpeSuffix };
  struct Step {
    explicit Step(Kind k) : kind(k) {}
    Kind kind;
    // Strip: the character; Replace: the replacement; Metaspace: replacement;
    // WordPiece: the continuation prefix; BpeSuffix: the end-of-word suffix
    std::string content;
    Pattern pattern;      // Replace
    size_t start = 0;     // Strip: at most this many leading `content` removed
    size_t stop = 0;      // Strip: at most this many trailing
    bool prepend = false; // Metaspace: the first token's replacements are dropped
    bool cleanup = false; // WordPiece: Hugging Face's cleanup of spaces before punctuation
  };
  Status parse(const Json &value, const JsonPath &at);
  Status parseStrip(const Json &value, const JsonPath &at);
  Status parseMetaspace(const Json &value, const JsonPath &at);
  Status parseWordPiece(const Json &value, const JsonPath &at);
  static Status run(const Step &step, std::vector<std::string> &tokens);

  std::vector<Step> steps_; // a Sequence, flattened
  bool present_ = false;
};

} // namespace llmc::tok
