#include "tokenizer/pre_tokenizers.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/chars.h"
#include "tokenizer/limits.h"
#include "tokenizer/utf8.h"

#include <algorithm>
#include <optional>
#include <utility>

namespace llmc::tok {
namespace {

// GPT-2's word regex, which the ByteLevel pre-tokenizer applies when
// use_regex is true (contractions, letters, numbers, other symbols, spaces).
constexpr const char *kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// A piece of a word and whether it was a pattern match.
struct Piece {
  size_t begin;
  size_t end;
  bool isMatch;
};

// Covers [0, size) with the matches and the gaps between them.
void piecesFromMatches(size_t size, const std::vector<Span> &matches, bool invert,
                       std::vector<Piece> &pieces) {
  pieces.clear();
  size_t last = 0;
  for (const Span &m : matches) {
    if (m.begin > last)
      pieces.push_back({last, m.begin, invert});
    pieces.push_back({m.begin, m.end, !invert});
    last = m.end;
  }
  if (last < size || pieces.empty())
    pieces.push_back({last, size, invert});
}

// Merges each run of the pieces selected by `absorb` into a neighbour,
// reading left to right (or right to left for MergedWithNext), the way
// Hugging Face's SplitDelimiterBehavior folds do.
template <typename Absorb>
void foldPieces(std::vector<Piece> &pieces, bool fromRight, Absorb absorb) {
  if (fromRight)
    std::reverse(pieces.begin(), pieces.end());
  std::vector<Piece> out;
  bool previousMatch = false;
  for (const Piece &p : pieces) {
    if (absorb(p.isMatch, previousMatch) && !out.empty()) {
      if (fromRight)
        out.back().begin = p.begin;
      else
        out.back().end = p.end;
    } else {
      out.push_back({p.begin, p.end, false});
    }
    previousMatch = p.isMatch;
  }
  if (fromRight)
    std::reverse(out.begin(), out.end());
  pieces = std::move(out);
}

} // namespace

Expected<PreTokenizer> PreTokenizer::fromJson(const Json &value, const JsonPath &at) {
  PreTokenizer pre;
  if (!value.is_null())
    LLMC_RETURN_IF_ERROR(pre.parse(value, at));
  return pre;
}

Status PreTokenizer::parse(const Json &value, const JsonPath &at) {
  if (!value.is_object())
    return at.wrongType("an object", value);
  LLMC_ASSIGN_OR_RETURN(std::string type, getString(value, "type", at));
  if (type == "Sequence") {
    LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type", "pretokenizers"}));
    LLMC_ASSIGN_OR_RETURN(const Json *list, getArray(value, "pretokenizers", at));
    for (size_t i = 0; i < list->size(); ++i)
      LLMC_RETURN_IF_ERROR(parse((*list)[i], at.child("pretokenizers").at(i)));
    return Status::ok();
  }
  if (type == "ByteLevel")
    return parseByteLevel(value, at);
  if (type == "Split")
    return parseSplit(value, at);
  if (type == "Metaspace")
    return parseMetaspace(value, at);
  bool known = false;
  LLMC_RETURN_IF_ERROR(parseSimple(type, value, at, known));
  if (known)
    return Status::ok();
  return at.child("type").error(
      "unsupported pre-tokenizer type '" + type +
      "' (supported: ByteLevel, Split, Metaspace, Whitespace, WhitespaceSplit, Punctuation, "
      "Digits, BertPreTokenizer, CharDelimiterSplit, Sequence)");
}

namespace {

std::string whereOf(const JsonPath &at, const std::string &type) {
  return *at.source + ": field '" + at.path + "' (" + type + ")";
}

Expected<PreTokenizer::Behavior> parseBehavior(const Json &value, const JsonPath &at,
                                               std::optional<PreTokenizer::Behavior> fallback);

} // namespace

// The pre-tokenizers that split on a class of characters.
Status PreTokenizer::parseSimple(const std::string &type, const Json &value, const JsonPath &at,
                                 bool &known) {
  static const std::pair<const char *, Kind> kinds[] = {
      {"Whitespace", Kind::Whitespace},   {"WhitespaceSplit", Kind::WhitespaceSplit},
      {"Punctuation", Kind::Punctuation}, {"Digits", Kind::Digits},
      {"BertPreTokenizer", Kind::Bert},   {"CharDelimiterSplit", Kind::CharDelimiter}};
  auto entry = std::find_if(std::begin(kinds), std::end(kinds),
                            [&](const auto &k) { return type == k.first; });
  known = entry != std::end(kinds);
  if (!known)
    return Status::ok();
  Step step(entry->second, whereOf(at, type));
  switch (step.kind) {
  case Kind::Punctuation: {
    LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type", "behavior"}));
    LLMC_ASSIGN_OR_RETURN(step.behavior, parseBehavior(value, at, Behavior::Isolated));
    break;
  }
  case Kind::Digits: {
    LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type", "individual_digits"}));
    LLMC_ASSIGN_OR_RETURN(bool individual, getBool(value, "individual_digits", false, at));
    step.behavior = individual ? Behavior::Isolated : Behavior::Contiguous;
    break;
  }
  case Kind::CharDelimiter: {
    LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type", "delimiter"}));
    LLMC_ASSIGN_OR_RETURN(step.replacement, getString(value, "delimiter", at));
    size_t length = 0;
    char32_t cp;
    if (step.replacement.empty() || !utf8::decode(step.replacement, length, cp) ||
        length != step.replacement.size())
      return at.child("delimiter").error("must be one character, got '" + step.replacement + "'");
    step.behavior = Behavior::Removed;
    break;
  }
  default:
    LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type"}));
    break;
  }
  steps_.push_back(std::move(step));
  return Status::ok();
}

Status PreTokenizer::parseByteLevel(const Json &value, const JsonPath &at) {
  LLMC_RETURN_IF_ERROR(
      checkKeys(value, at, {"type", "add_prefix_space", "trim_offsets", "use_regex"}));
  Step step(Kind::ByteLevel, whereOf(at, "ByteLevel"));
  LLMC_ASSIGN_OR_RETURN(step.addPrefixSpace, getBool(value, "add_prefix_space", true, at));
  LLMC_ASSIGN_OR_RETURN(step.useRegex, getBool(value, "use_regex", true, at));
  LLMC_ASSIGN_OR_RETURN(bool trimOffsets, getBool(value, "trim_offsets", true, at));
  (void)trimOffsets; // offsets only, never ids
  if (step.useRegex) {
    static const Pattern gpt2 = Pattern::fromJson(Json{{"Regex", kGpt2Regex}}, at).value();
    step.pattern = gpt2;
  }
  steps_.push_back(std::move(step));
  return Status::ok();
}

namespace {

Expected<PreTokenizer::Behavior> parseBehavior(const Json &value, const JsonPath &at,
                                               std::optional<PreTokenizer::Behavior> fallback) {
  using Behavior = PreTokenizer::Behavior;
  if (fallback && member(value, "behavior") == nullptr)
    return *fallback;
  LLMC_ASSIGN_OR_RETURN(std::string behavior, getString(value, "behavior", at));
  static const std::pair<const char *, Behavior> kBehaviors[] = {
      {"Removed", Behavior::Removed},
      {"Isolated", Behavior::Isolated},
      {"MergedWithPrevious", Behavior::MergedWithPrevious},
      {"MergedWithNext", Behavior::MergedWithNext},
      {"Contiguous", Behavior::Contiguous}};
  auto known = std::find_if(std::begin(kBehaviors), std::end(kBehaviors),
                            [&](const auto &entry) { return behavior == entry.first; });
  if (known == std::end(kBehaviors))
    return at.child("behavior")
        .error("unknown behavior '" + behavior +
               "' (expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous)");
  return known->second;
}

} // namespace

Status PreTokenizer::parseSplit(const Json &value, const JsonPath &at) {
  LLMC_RETURN_IF_ERROR(checkKeys(value, at, {"type", "pattern", "behavior", "invert"}));
  const Json *pattern = member(value, "pattern");
  if (pattern == nullptr)
    return at.child("pattern").error("missing (expected {\"String\": ...} or {\"Regex\": ...})");
  Step step(Kind::Split, whereOf(at, "Split"));
  LLMC_ASSIGN_OR_RETURN(step.pattern, Pattern::fromJson(*pattern, at.child("pattern")));
  LLMC_ASSIGN_OR_RETURN(step.behavior, parseBehavior(value, at, std::nullopt));
  LLMC_ASSIGN_OR_RETURN(step.invert, getBool(value, "invert", false, at));
  steps_.push_back(std::move(step));
  return Status::ok();
}

Status PreTokenizer::parseMetaspace(const Json &value, const JsonPath &at) {
  LLMC_RETURN_IF_ERROR(
      checkKeys(value, at,
                {"type", "replacement", "add_prefix_space", "prepend_scheme", "split", "str_rep"}));
  Step step(Kind::Metaspace, whereOf(at, "Metaspace"));
  LLMC_ASSIGN_OR_RETURN(step.replacement, getString(value, "replacement", at));
  size_t length = 0;
  char32_t cp;
  if (step.replacement.empty() || !utf8::decode(step.replacement, length, cp) ||
      length != step.replacement.size())
    return at.child("replacement").error("must be one character, got '" + step.replacement + "'");
  LLMC_ASSIGN_OR_RETURN(step.split, getBool(value, "split", true, at));
  LLMC_ASSIGN_OR_RETURN(auto scheme, getOptionalString(value, "prepend_scheme", at));
  LLMC_ASSIGN_OR_RETURN(bool addPrefixSpace, getBool(value, "add_prefix_space", true, at));
  if (!scheme)
    step.prepend = addPrefixSpace ? Prepend::Always : Prepend::Never;
  else if (*scheme == "always")
    step.prepend = Prepend::Always;
  else if (*scheme == "first")
    step.prepend = Prepend::First;
  else if (*scheme == "never")
    step.prepend = Prepend::Never;
  else
    return at.child("prepend_scheme")
        .error("unknown value '" + *scheme + "' (expected always, first or never)");
  if (!addPrefixSpace && step.prepend != Prepend::Never)
    return at.child("add_prefix_space").error("false contradicts prepend_scheme '" + *scheme + "'");
  step.pattern = Pattern::literal(step.replacement, step.where);
  steps_.push_back(std::move(step));
  return Status::ok();
}

Status PreTokenizer::runStep(const Step &step, Words &words) {
  switch (step.kind) {
  case Kind::ByteLevel:
    return runByteLevel(step, words);
  case Kind::Split:
    return runSplit(step, words);
  case Kind::Metaspace:
    return runMetaspace(step, words);
  case Kind::Whitespace:
  case Kind::WhitespaceSplit:
  case Kind::Punctuation:
  case Kind::Digits:
  case Kind::Bert:
  case Kind::CharDelimiter:
    runByChars(step, words);
    return Status::ok();
  }
  return Status::ok();
}

Status PreTokenizer::run(Words &words) const {
  size_t inputBytes = words.text.size();
  for (const Step &step : steps_) {
    LLMC_RETURN_IF_ERROR(runStep(step, words));
    LLMC_RETURN_IF_ERROR(checkGrowth(step.where, inputBytes, words.text.size()));
  }
  return Status::ok();
}

namespace {

// Splits each word of `words` at the matches that find(text, matches)
// appends (in place: the text does not change, only the word boundaries),
// dropping empty pieces.
template <typename Find, typename Behave>
Status splitWords(Words &words, bool invert, Find find, Behave behave) {
  std::vector<Word> out;
  out.reserve(words.words.size());
  std::vector<Span> matches;
  std::vector<Piece> pieces;
  for (const Word &w : words.words) {
    std::string_view text = std::string_view(words.text).substr(w.begin, w.end - w.begin);
    matches.clear();
    LLMC_RETURN_IF_ERROR(find(text, matches));
    piecesFromMatches(text.size(), matches, invert, pieces);
    behave(pieces);
    for (const Piece &p : pieces)
      if (p.end > p.begin)
        out.push_back({w.begin + p.begin, w.begin + p.end, w.atStart && p.begin == 0});
  }
  words.words = std::move(out);
  return Status::ok();
}

template <typename Behave>
Status splitWords(const Pattern &pattern, bool invert, Words &words, Behave behave) {
  return splitWords(
      words, invert,
      [&](std::string_view text, std::vector<Span> &matches) {
        return pattern.findAll(text, matches);
      },
      behave);
}

// Hugging Face's SplitDelimiterBehavior on the pieces of one word.
void applyBehavior(PreTokenizer::Behavior behavior, std::vector<Piece> &pieces) {
  using Behavior = PreTokenizer::Behavior;
  switch (behavior) {
  case Behavior::Removed:
    pieces.erase(
        std::remove_if(pieces.begin(), pieces.end(), [](const Piece &p) { return p.isMatch; }),
        pieces.end());
    break;
  case Behavior::Isolated:
    break;
  case Behavior::MergedWithPrevious:
    foldPieces(pieces, false, [](bool match, bool previous) { return match && !previous; });
    break;
  case Behavior::MergedWithNext:
    foldPieces(pieces, true, [](bool match, bool previous) { return match && !previous; });
    break;
  case Behavior::Contiguous:
    foldPieces(pieces, false, [](bool match, bool previous) { return match == previous; });
    break;
  }
}

// Each character for which isDelimiter(cp) holds is one match (Hugging
// Face's split on a char predicate).
template <typename Predicate>
void splitOnChars(Words &words, PreTokenizer::Behavior behavior, Predicate isDelimiter) {
  auto find = [&](std::string_view text, std::vector<Span> &matches) {
    for (size_t pos = 0; pos < text.size();) {
      size_t start = pos;
      char32_t cp = 0xFFFD;
      utf8::decode(text, pos, cp);
      if (isDelimiter(cp))
        matches.push_back({start, pos});
    }
    return Status::ok();
  };
  (void)splitWords(words, false, find,
                   [&](std::vector<Piece> &pieces) { applyBehavior(behavior, pieces); });
}

// Whitespace: the runs of \w and the runs of [^\w\s] are the words.
void splitWordRuns(Words &words) {
  auto find = [](std::string_view text, std::vector<Span> &matches) {
    int runKind = 0; // 0: space, 1: word characters, 2: other characters
    for (size_t pos = 0; pos < text.size();) {
      size_t start = pos;
      char32_t cp = 0xFFFD;
      utf8::decode(text, pos, cp);
      int kind = utf8::isWhitespace(cp) ? 0 : chars::isWordChar(cp) ? 1 : 2;
      if (kind != 0 && kind == runKind)
        matches.back().end = pos;
      else if (kind != 0)
        matches.push_back({start, pos});
      runKind = kind;
    }
    return Status::ok();
  };
  (void)splitWords(words, false, find, [](std::vector<Piece> &pieces) {
    pieces.erase(
        std::remove_if(pieces.begin(), pieces.end(), [](const Piece &p) { return !p.isMatch; }),
        pieces.end());
  });
}

} // namespace

void PreTokenizer::runByChars(const Step &step, Words &words) {
  auto isSpace = [](char32_t cp) { return utf8::isWhitespace(cp); };
  switch (step.kind) {
  case Kind::Whitespace:
    splitWordRuns(words);
    break;
  case Kind::WhitespaceSplit:
    splitOnChars(words, Behavior::Removed, isSpace);
    break;
  case Kind::Punctuation:
    splitOnChars(words, step.behavior, chars::isPunctuation);
    break;
  case Kind::Digits:
    splitOnChars(words, step.behavior, chars::isNumeric);
    break;
  case Kind::Bert:
    splitOnChars(words, Behavior::Removed, isSpace);
    splitOnChars(words, Behavior::Isolated, chars::isPunctuation);
    break;
  case Kind::CharDelimiter: {
    char32_t delimiter = 0;
    size_t pos = 0;
    utf8::decode(step.replacement, pos, delimiter);
    splitOnChars(words, Behavior::Removed, [&](char32_t cp) { return cp == delimiter; });
    break;
  }
  default:
    break;
  }
}

Status PreTokenizer::runSplit(const Step &step, Words &words) {
  return splitWords(step.pattern, step.invert, words,
                    [&](std::vector<Piece> &pieces) { applyBehavior(step.behavior, pieces); });
}

Status PreTokenizer::runByteLevel(const Step &step, Words &words) {
  if (step.addPrefixSpace) {
    Words prefixed;
    for (const Word &w : words.words) {
      size_t begin = prefixed.text.size();
      if (words.text[w.begin] != ' ')
        prefixed.text += ' ';
      prefixed.text.append(words.text, w.begin, w.end - w.begin);
      prefixed.words.push_back({begin, prefixed.text.size(), w.atStart});
    }
    words = std::move(prefixed);
  }
  if (step.useRegex)
    LLMC_RETURN_IF_ERROR(splitWords(step.pattern, false, words, [](std::vector<Piece> &) {}));
  Words mapped;
  mapped.text.reserve(words.text.size() * 2);
  for (const Word &w : words.words) {
    size_t begin = mapped.text.size();
    byte_level::appendMapped(std::string_view(words.text).substr(w.begin, w.end - w.begin),
                             mapped.text);
    mapped.words.push_back({begin, mapped.text.size(), w.atStart});
  }
  words = std::move(mapped);
  return Status::ok();
}

Status PreTokenizer::runMetaspace(const Step &step, Words &words) {
  static const Pattern space = Pattern::literal(" ");
  Words replaced;
  for (const Word &w : words.words) {
    std::string_view text = std::string_view(words.text).substr(w.begin, w.end - w.begin);
    size_t begin = replaced.text.size();
    bool startsWithReplacement =
        text.substr(0, 1) == " " || text.substr(0, step.replacement.size()) == step.replacement;
    bool prepend = step.prepend == Prepend::Always || (step.prepend == Prepend::First && w.atStart);
    if (prepend && !startsWithReplacement)
      replaced.text += step.replacement;
    LLMC_ASSIGN_OR_RETURN(std::string spaced,
                          space.replaceAll(text, step.replacement, growthLimit(text.size())));
    replaced.text += spaced;
    replaced.words.push_back({begin, replaced.text.size(), w.atStart});
  }
  words = std::move(replaced);
  if (!step.split)
    return Status::ok();
  return splitWords(step.pattern, false, words, [](std::vector<Piece> &pieces) {
    foldPieces(pieces, true, [](bool match, bool previous) { return match && !previous; });
  });
}

} // namespace llmc::tok
