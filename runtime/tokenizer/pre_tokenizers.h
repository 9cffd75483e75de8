// tokenizer.json "pre_tokenizer": splits normalized text into words that the
// BPE model encodes independently (merges never cross a word boundary).
// Supported: ByteLevel (GPT-2 regex split + byte-to-character mapping),
// Split (literal or regex pattern, all five delimiter behaviours, invert),
// Metaspace (space -> U+2581 with prepend_scheme always/first/never) and
// Sequence of them.
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

  void run(Words &words) const;

private:
  // How a Split pattern's matches become words (Hugging Face's SplitDelimiterBehavior).
  enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };
  enum class Kind { ByteLevel, Split, Metaspace };
  enum class Prepend { Always, First, Never };
  struct Step {
    explicit Step(Kind k) : kind(k) {}
    Kind kind;
    Pattern pattern;             // Split; ByteLevel with use_regex (the GPT-2 regex)
    bool useRegex = false;       // ByteLevel
    bool addPrefixSpace = false; // ByteLevel
    Behavior behavior = Behavior::Isolated;
    bool invert = false;     // Split
    std::string replacement; // Metaspace
    Prepend prepend = Prepend::Always;
    bool split = true; // Metaspace
  };
  Status parse(const Json &value, const JsonPath &at);
  Status parseSplit(const Json &value, const JsonPath &at);
  Status parseByteLevel(const Json &value, const JsonPath &at);
  Status parseMetaspace(const Json &value, const JsonPath &at);
  static void runSplit(const Step &step, Words &words);
  static void runByteLevel(const Step &step, Words &words);
  static void runMetaspace(const Step &step, Words &words);

  std::vector<Step> steps_; // a Sequence, flattened
};

} // namespace llmc::tok
