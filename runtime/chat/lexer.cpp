// The lexer, with jinja2's whitespace rules as transformers configures them:
//  - trim_blocks: the first "\n" after a block or comment tag is dropped;
//  - lstrip_blocks: spaces and tabs from the start of a line up to a block or
//    comment tag are dropped (not before {{ }});
//  - "{%-" / "-%}" (and {{- -}}, {#- -#}) strip all whitespace on that side,
//    "{%+" / "+%}" turn lstrip/trim off for that tag;
//  - inside (), [] and {} the closing "}}" and "%}" are operators, so
//    {{ {'a': {'b': 1}} }} lexes.
#include "chat/ast.h"

#include <cstring>

namespace llmc::chat {
namespace {

[[noreturn]] void syntaxError(std::string message, size_t offset) {
  throw RenderError{std::move(message), offset};
}

// Decodes the code point at `pos` (UTF-8); `length` gets its byte count.
char32_t codepointAt(const std::string &s, size_t pos, size_t &length) {
  unsigned char c = static_cast<unsigned char>(s[pos]);
  int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  if (pos + size_t(n) > s.size())
    n = 1;
  char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (int i = 1; i < n; ++i)
    cp = (cp << 6) | (static_cast<unsigned char>(s[pos + size_t(i)]) & 0x3F);
  length = size_t(n);
  return cp;
}

size_t skipWhitespace(const std::string &s, size_t pos) {
  while (pos < s.size()) {
    size_t length = 0;
    if (!isPyWhitespace(codepointAt(s, pos, length)))
      break;
    pos += length;
  }
  return pos;
}

// The end of `text` without trailing whitespace (Python's str.rstrip()).
size_t rstripEnd(const std::string &text) {
  size_t end = text.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80)
      --start;
    size_t length = 0;
    if (!isPyWhitespace(codepointAt(text, start, length)))
      break;
    end = start;
  }
  return end;
}

bool allWhitespace(const std::string &text, size_t from) {
  return from < text.size() && skipWhitespace(text, from) == text.size();
}

enum class TagKind { Variable, Block, Comment };

class Lexer {
public:
  explicit Lexer(const std::string &source) : src_(source) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      size_t tag = findTagStart(pos_);
      if (tag == std::string::npos) {
        emitData(src_.substr(pos_), pos_);
        break;
      }
      lexTag(tag);
    }
    tokens_.push_back(Token{TokenKind::End, "", 0, 0.0, src_.size()});
    return std::move(tokens_);
  }

private:
  const std::string &src_;
  size_t pos_ = 0;
  bool lineStarting_ = true; // the previous tag ended with a newline
  std::vector<Token> tokens_;

  size_t findTagStart(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1))
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    return std::string::npos;
  }

  void emitData(std::string text, size_t offset) {
    if (!text.empty())
      tokens_.push_back(Token{TokenKind::Data, std::move(text), 0, 0.0, offset});
  }

  // The text before a tag, with the tag's strip sign (or lstrip_blocks) applied.
  std::string strippedText(size_t from, size_t to, char sign, bool lstripAllowed) const {
    std::string text = src_.substr(from, to - from);
    if (sign == '-') {
      text.resize(rstripEnd(text));
    } else if (sign != '+' && lstripAllowed) {
      size_t lineStart = text.rfind('\n');
      lineStart = lineStart == std::string::npos ? 0 : lineStart + 1;
      if ((lineStart > 0 || lineStarting_) && allWhitespace(text, lineStart))
        text.resize(lineStart);
    }
    return text;
  }

  // After a block or comment end at `pos` ("%}" or "#}" already consumed):
  // `sign` is the character before it.
  size_t afterBlockEnd(size_t pos, char sign) const {
    if (sign == '-')
      return skipWhitespace(src_, pos);
    if (sign != '+' && pos < src_.size() && src_[pos] == '\n') // trim_blocks
      return pos + 1;
    return pos;
  }

  void finishTag(size_t end) {
    lineStarting_ = end > 0 && src_[end - 1] == '\n';
    pos_ = end;
  }

  void lexTag(size_t tag) {
    char opener = src_[tag + 1];
    TagKind kind = opener == '{' ? TagKind::Variable : opener == '%' ? TagKind::Block : TagKind::Comment;
    size_t inner = tag + 2;
    char sign = inner < src_.size() && (src_[inner] == '-' || src_[inner] == '+') ? src_[inner] : 0;
    if (sign)
      ++inner;
    size_t rawBody = kind == TagKind::Block ? matchRawBegin(inner) : std::string::npos;
    emitData(strippedText(pos_, tag, sign, kind != TagKind::Variable), pos_);
    if (rawBody != std::string::npos)
      return lexRaw(tag, rawBody);
    if (kind == TagKind::Comment)
      return lexComment(tag, inner);
    tokens_.push_back(Token{kind == TagKind::Variable ? TokenKind::VariableBegin : TokenKind::BlockBegin,
                            "", 0, 0.0, tag});
    lexInsideTag(kind, tag, inner);
  }

  // `{% raw %}`: returns where the raw text starts, or npos.
  size_t matchRawBegin(size_t inner) const {
    size_t p = skipWhitespace(src_, inner);
    if (src_.compare(p, 3, "raw") != 0)
      return std::string::npos;
    p = skipWhitespace(src_, p + 3);
    if (src_.compare(p, 3, "-%}") == 0)
      return skipWhitespace(src_, p + 3);
    if (src_.compare(p, 2, "%}") == 0)
      return p + 2;
    return std::string::npos;
  }

  void lexRaw(size_t tag, size_t body) {
    for (size_t i = src_.find("{%", body); i != std::string::npos; i = src_.find("{%", i + 1)) {
      size_t p = i + 2;
      char sign = p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p] : 0;
      if (sign)
        ++p;
      p = skipWhitespace(src_, p);
      if (src_.compare(p, 6, "endraw") != 0)
        continue;
      p = skipWhitespace(src_, p + 6);
      char endSign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+'))
        endSign = src_[p++];
      if (src_.compare(p, 2, "%}") != 0)
        continue;
      lineStarting_ = body > 0 && src_[body - 1] == '\n';
      emitData(strippedText(body, i, sign, true), body);
      finishTag(afterBlockEnd(p + 2, endSign));
      return;
    }
    syntaxError("missing end of raw directive: {% raw %} needs a matching {% endraw %}", tag);
  }

  void lexComment(size_t tag, size_t inner) {
    size_t close = src_.find("#}", inner);
    if (close == std::string::npos)
      syntaxError("missing end of comment tag: {# needs a matching #}", tag);
    char sign = close > inner && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
    finishTag(afterBlockEnd(close + 2, sign));
  }

  void lexInsideTag(TagKind kind, size_t tag, size_t p) {
    std::vector<char> brackets;
    while (true) {
      if (p >= src_.size())
        syntaxError(std::string("unexpected end of template: the tag opened here has no closing ") +
                        (kind == TagKind::Variable ? "'}}'" : "'%}'"),
                    tag);
      if (brackets.empty() && tryTagEnd(kind, p))
        return;
      size_t afterSpace = skipWhitespace(src_, p);
      if (afterSpace != p) {
        p = afterSpace;
        continue;
      }
      p = lexToken(p, brackets);
    }
  }

  bool tryTagEnd(TagKind kind, size_t p) {
    if (kind == TagKind::Variable) {
      if (src_.compare(p, 3, "-}}") == 0) {
        tokens_.push_back(Token{TokenKind::VariableEnd, "", 0, 0.0, p});
        finishTag(skipWhitespace(src_, p + 3));
        return true;
      }
      if (src_.compare(p, 2, "}}") == 0) {
        tokens_.push_back(Token{TokenKind::VariableEnd, "", 0, 0.0, p});
        finishTag(p + 2);
        return true;
      }
      return false;
    }
    char sign = 0;
    size_t q = p;
    if (src_[q] == '-' || src_[q] == '+')
      sign = src_[q++];
    if (src_.compare(q, 2, "%}") != 0)
      return false;
    tokens_.push_back(Token{TokenKind::BlockEnd, "", 0, 0.0, p});
    finishTag(afterBlockEnd(q + 2, sign));
    return true;
  }

  static bool isDigit(char c) { return c >= '0' && c <= '9'; }
  static bool isNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

  // Digits with single underscores between them ("1_000"); returns the end.
  size_t digitRun(size_t p, bool (*digit)(char)) const {
    if (p >= src_.size() || !digit(src_[p]))
      return std::string::npos;
    size_t q = p + 1;
    while (q < src_.size()) {
      if (digit(src_[q]))
        ++q;
      else if (src_[q] == '_' && q + 1 < src_.size() && digit(src_[q + 1]))
        q += 2;
      else
        break;
    }
    return q;
  }

  static std::string withoutUnderscores(const std::string &s) {
    std::string out;
    for (char c : s)
      if (c != '_')
        out += c;
    return out;
  }

  size_t lexNumber(size_t p) {
    auto decimal = [](char c) { return c >= '0' && c <= '9'; };
    // A float: digits then a fraction and/or an exponent (jinja2's float_re).
    bool afterDot = p > 0 && src_[p - 1] == '.';
    size_t intEnd = digitRun(p, decimal);
    if (!afterDot) {
      size_t q = intEnd;
      bool isFloat = false;
      if (q < src_.size() && src_[q] == '.') {
        size_t fracEnd = digitRun(q + 1, decimal);
        if (fracEnd != std::string::npos) {
          q = fracEnd;
          isFloat = true;
        }
      }
      if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
        size_t e = q + 1;
        if (e < src_.size() && (src_[e] == '+' || src_[e] == '-'))
          ++e;
        size_t expEnd = digitRun(e, decimal);
        if (expEnd != std::string::npos) {
          q = expEnd;
          isFloat = true;
        }
      }
      if (isFloat) {
        std::string text = withoutUnderscores(src_.substr(p, q - p));
        tokens_.push_back(Token{TokenKind::Float, text, 0, std::strtod(text.c_str(), nullptr), p});
        return q;
      }
    }
    // An integer: 0b, 0o, 0x prefixes or decimal.
    int base = 10;
    size_t digitsStart = p, end = intEnd;
    if (src_[p] == '0' && p + 1 < src_.size()) {
      char prefix = char(src_[p + 1] | 0x20);
      bool (*digit)(char) = nullptr;
      if (prefix == 'b') {
        base = 2;
        digit = [](char c) { return c == '0' || c == '1'; };
      } else if (prefix == 'o') {
        base = 8;
        digit = [](char c) { return c >= '0' && c <= '7'; };
      } else if (prefix == 'x') {
        base = 16;
        digit = [](char c) { return std::strchr("0123456789abcdefABCDEF", c) != nullptr && c != 0; };
      }
      if (digit) {
        size_t q = p + 2;
        if (q < src_.size() && src_[q] == '_')
          ++q;
        size_t runEnd = digitRun(q, digit);
        if (runEnd == std::string::npos)
          syntaxError("malformed integer literal", p);
        digitsStart = q;
        end = runEnd;
      }
    }
    std::string digits = withoutUnderscores(src_.substr(digitsStart, end - digitsStart));
    errno = 0;
    char *parsedEnd = nullptr;
    long long value = std::strtoll(digits.c_str(), &parsedEnd, base);
    if (errno == ERANGE)
      syntaxError("integer literal " + src_.substr(p, end - p) + " does not fit in 64 bits", p);
    tokens_.push_back(Token{TokenKind::Integer, src_.substr(p, end - p), value, 0.0, p});
    return end;
  }

  size_t lexString(size_t p) {
    char quote = src_[p];
    size_t q = p + 1;
    std::string raw;
    while (q < src_.size() && src_[q] != quote) {
      if (src_[q] == '\\' && q + 1 < src_.size()) {
        raw += src_[q];
        raw += src_[q + 1];
        q += 2;
        continue;
      }
      raw += src_[q++];
    }
    if (q >= src_.size())
      syntaxError(std::string("unterminated string: a ") + quote + " opens here without its closing " +
                      quote,
                  p);
    tokens_.push_back(Token{TokenKind::String, unescape(raw, p), 0, 0.0, p});
    return q + 1;
  }

  // Python's unicode-escape decoding, as jinja2 applies it to string literals.
  static std::string unescape(const std::string &raw, size_t offset) {
    std::string out;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '\\' || i + 1 >= raw.size()) {
        out += raw[i];
        continue;
      }
      char c = raw[++i];
      switch (c) {
      case '\n':
        break; // a backslash-newline continues the line
      case '\\':
      case '\'':
      case '"':
        out += c;
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x':
      case 'u':
      case 'U': {
        size_t count = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        if (i + count >= raw.size() + 1 ||
            raw.substr(i + 1, count).find_first_not_of("0123456789abcdefABCDEF") != std::string::npos ||
            raw.size() - (i + 1) < count)
          syntaxError(std::string("truncated \\") + c + " escape in a string literal", offset);
        unsigned long cp = std::strtoul(raw.substr(i + 1, count).c_str(), nullptr, 16);
        if (cp > 0x10FFFF)
          syntaxError("\\U escape beyond U+10FFFF in a string literal", offset);
        appendUtf8(out, char32_t(cp));
        i += count;
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          unsigned cp = 0;
          size_t n = 0;
          while (n < 3 && i < raw.size() && raw[i] >= '0' && raw[i] <= '7') {
            cp = cp * 8 + unsigned(raw[i] - '0');
            ++i;
            ++n;
          }
          --i;
          appendUtf8(out, char32_t(cp));
        } else {
          out += '\\';
          out += c;
        }
      }
    }
    return out;
  }

  size_t lexToken(size_t p, std::vector<char> &brackets) {
    char c = src_[p];
    if (isDigit(c))
      return lexNumber(p);
    if (isNameStart(c)) {
      size_t q = p + 1;
      while (q < src_.size() && (isNameStart(src_[q]) || isDigit(src_[q])))
        ++q;
      tokens_.push_back(Token{TokenKind::Name, src_.substr(p, q - p), 0, 0.0, p});
      return q;
    }
    if (c == '\'' || c == '"')
      return lexString(p);
    static const char *const twoCharOps[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char *op : twoCharOps)
      if (src_.compare(p, 2, op) == 0) {
        tokens_.push_back(Token{TokenKind::Operator, op, 0, 0.0, p});
        return p + 2;
      }
    if (std::strchr("+-/*%~[](){}<>=.:|,;", c) == nullptr || c == 0)
      syntaxError(std::string("unexpected character '") + c + "' inside a tag", p);
    if (c == '(' || c == '[' || c == '{')
      brackets.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    if (c == ')' || c == ']' || c == '}') {
      if (brackets.empty())
        syntaxError(std::string("unexpected '") + c + "'", p);
      if (brackets.back() != c)
        syntaxError(std::string("unexpected '") + c + "', expected '" + brackets.back() + "'", p);
      brackets.pop_back();
    }
    tokens_.push_back(Token{TokenKind::Operator, std::string(1, c), 0, 0.0, p});
    return p + 1;
  }
};

} // namespace

std::vector<Token> lexTemplate(const std::string &source) { return Lexer(source).run(); }

} // namespace llmc::chat
