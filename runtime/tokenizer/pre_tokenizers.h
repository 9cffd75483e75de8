// tokenizer.json "pre_tokenizer": splits normalized text into words that the
// BPE model encodes independently (merges never cross a word boundary).
// Supported: ByteLevel (GPT-2 regex split + byte-to-character mapping),
// Split (literal or regex pattern, all five delimiter behaviours, invert),
// Metaspace (space -> U+2581 with prepend_scheme always/first/never),
// Whitespace (\w+ and [^\w\s]+ runs), WhitespaceSplit, Punctuation (with a
// behaviour), Digits (individual_digits), BertPreTokenizer,
// CharDelimiterSplit and Sequence of them. The output is bounded (limits.h).
#pragma once

#include "tokenizer/json_path.h"
#include "tokenizer/regex.h"

#include <string>
#include <vector>

namespace llmc::tok {

// A word: a span of Words::text. `atStart` is true for the word that starts
// the input text (Metaspace's prepend_scheme "first" only prepends to it).
struct Word {
  size_t begin;
  size_t end;
  bool atStart;
};

struct Words {
  std::string text;
  std::vector<Word> words;
};

class PreTokenizer {
public:
  // `value` is the "pre_tokenizer" field (null: the whole text is one word).
  static Expected<PreTokenizer> fromJson(const Json &value, const JsonPath &at);

  // Fails on a regex PCRE2 gives up on, or output beyond the bound.
  Status run(Words &words) const;

  // How a split's matches become words (Hugging Face's SplitDelimiterBehavior).
  enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

private:
  enum class Kind {
    ByteLevel,
    Split,
    Metaspace,
    Whitespace,      // runs of \w, runs of [^\w\s]; spaces dropped
    WhitespaceSplit, // split on White_Space, dropped
    Punctuation,     // each punctuation character, by `behavior`
    Digits,          // each numeric character (Isolated) or runs (Contiguous)
    Bert,            // WhitespaceSplit, then each punctuation character isolated
    CharDelimiter    // split on `replacement` (one character), dropped
  };
  enum class Prepend { Always, First, Never };
  struct Step {
    Step(Kind k, std::string w) : kind(k), where(std::move(w)) {}
    Kind kind;
    std::string where;           // "file: field 'pre_tokenizer...' (Type)", for errors
    Pattern pattern;             // Split; ByteLevel with use_regex (the GPT-2 regex)
    bool useRegex = false;       // ByteLevel
    bool addPrefixSpace = false; // ByteLevel
    Behavior behavior = Behavior::Isolated;
    bool invert = false;     // Split
    std::string replacement; // Metaspace; CharDelimiter: the delimiter
    Prepend prepend = Prepend::Always;
    bool split = true; // Metaspace
  };
  Status parse(const Json &value, const JsonPath &at);
  Status parseSplit(const Json &value, const JsonPath &at);
  Status parseByteLevel(const Json &value, const JsonPath &at);
  Status parseMetaspace(const Json &value, const JsonPath &at);
  Status parseSimple(const std::string &type, const Json &value, const JsonPath &at, bool &known);
  static Status runStep(const Step &step, Words &words);
  static Status runSplit(const Step &step, Words &words);
  static Status runByteLevel(const Step &step, Words &words);
  static Status runMetaspace(const Step &step, Words &words);
  static void runByChars(const Step &step, Words &words);

  std::vector<Step> steps_; // a Sequence, flattened
};

} // namespace llmc::tok
