// Patterns used by tokenizer.json components: Split pre-tokenizers, Replace
// normalizers and decoders. A pattern is either a literal string
// ({"String": " "}) or a regular expression ({"Regex": "..."}) run by PCRE2
// with PCRE2_UTF | PCRE2_UCP (so \s, \p{L}, \w are Unicode-aware, as in
// Hugging Face's Oniguruma-based matcher) and JIT compiled when available.
// A match that PCRE2 gives up on (its match, depth or heap limit, reached by
// catastrophic backtracking) is an error naming the pattern, never "no match".
#pragma once

#include "support/status.h"
#include "tokenizer/json_path.h"

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace llmc::tok {

// A half-open byte range [begin, end) of some text.
struct Span {
  size_t begin;
  size_t end;
};

class Regex {
public:
  // Compiles `pattern`; the error says what PCRE2 rejected and where.
  static Expected<Regex> compile(const std::string &pattern);

  // Appends the successive non-overlapping matches in `text` (valid UTF-8).
  // After an empty match the search resumes one character further on.
  // Fails when PCRE2 gives up (match limit): the error names the pattern.
  Status findAll(std::string_view text, std::vector<Span> &matches) const;

  const std::string &pattern() const;

private:
  struct Code;
  std::shared_ptr<const Code> code_;
};

class Pattern {
public:
  // Parses {"String": "..."} or {"Regex": "..."} at `at`; errors at run
  // time name `at` too.
  static Expected<Pattern> fromJson(const Json &value, const JsonPath &at);
  // `where` names the component in errors ("file: field 'decoder'").
  static Pattern literal(std::string text, std::string where = "");

  // Appends the non-overlapping matches of the pattern in `text`, left to right.
  Status findAll(std::string_view text, std::vector<Span> &matches) const;

  // Replaces every match in `text` with `content`. Fails, before building
  // anything, if the result would exceed `maxOutputBytes`.
  Expected<std::string> replaceAll(std::string_view text, std::string_view content,
                                   size_t maxOutputBytes) const;
  // replaceAll in place; leaves `text` untouched (no copy) when nothing matches.
  Status replaceInPlace(std::string &text, std::string_view content, size_t maxOutputBytes) const;

private:
  std::string where_; // "file: field 'path'", for errors
  std::string literal_;
  std::shared_ptr<const Regex> regex_; // null for a literal pattern
};

} // namespace llmc::tok
