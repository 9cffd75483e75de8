// The builtins a chat template calls: operators, jinja2's filters and tests,
// Python's str/dict/list methods (the sandbox refuses the mutating ones), and
// the globals (range, namespace, dict, cycler, joiner, raise_exception,
// strftime_now). Each follows the Python or jinja2 original it is named after.
#include "chat/renderer.h"

#include <utf8proc.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <unordered_map>

namespace llmc::chat {

void failUndefined(const Value &undefined) {
  fail(undefined.str().empty() ? "a value is undefined" : undefined.str());
}

namespace {

// ---- arguments ---------------------------------------------------------------

// Binds a call's arguments to parameter names as Python does.
class Params {
public:
  Params(const std::string &function, const CallArgs &args, std::vector<const char *> names)
      : values_(names.size()), given_(names.size(), false) {
    if (args.positional.size() > names.size())
      fail(function + "() takes at most " + std::to_string(names.size()) + " argument(s) (" +
           std::to_string(args.positional.size()) + " given)");
    for (size_t i = 0; i < args.positional.size(); ++i) {
      values_[i] = args.positional[i];
      given_[i] = true;
    }
    for (const auto &keyword : args.keyword) {
      const std::string &key = keyword.first;
      const Value &value = keyword.second;
      auto it = std::find_if(names.begin(), names.end(), [&](const char *n) { return key == n; });
      if (it == names.end())
        fail(function + "() got an unexpected keyword argument '" + key + "'");
      size_t i = size_t(it - names.begin());
      if (given_[i])
        fail(function + "() got multiple values for argument '" + key + "'");
      values_[i] = value;
      given_[i] = true;
    }
  }
  bool has(size_t i) const { return given_[i]; }
  bool hasValue(size_t i) const { return given_[i] && !values_[i].isNone(); }
  const Value &operator[](size_t i) const { return values_[i]; }
  Value get(size_t i, Value fallback) const { return given_[i] ? values_[i] : fallback; }

private:
  std::vector<Value> values_;
  std::vector<bool> given_;
};

int64_t requireInt(const Value &v, const std::string &what) {
  if (v.isInt() || v.isBool())
    return v.asInt();
  if (v.isUndefined())
    failUndefined(v);
  fail(what + ": expected an integer, got " + typeName(v));
}

const std::string &requireString(const Value &v, const std::string &what) {
  if (v.isString())
    return v.str();
  if (v.isUndefined())
    failUndefined(v);
  fail(what + ": expected a string, got " + typeName(v));
}

// ---- strings -----------------------------------------------------------------

char32_t upperOf(char32_t c) { return char32_t(utf8proc_toupper(utf8proc_int32_t(c))); }
char32_t lowerOf(char32_t c) { return char32_t(utf8proc_tolower(utf8proc_int32_t(c))); }
char32_t titleOf(char32_t c) { return char32_t(utf8proc_totitle(utf8proc_int32_t(c))); }
utf8proc_category_t categoryOf(char32_t c) { return utf8proc_category(utf8proc_int32_t(c)); }
bool isCased(char32_t c) {
  auto cat = categoryOf(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}
bool isAlpha(char32_t c) {
  auto cat = categoryOf(c);
  return cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO;
}
bool isDecimal(char32_t c) { return categoryOf(c) == UTF8PROC_CATEGORY_ND; }
bool isNumericChar(char32_t c) {
  auto cat = categoryOf(c);
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}
bool isWordChar(char32_t c) { return c == '_' || isAlpha(c) || isNumericChar(c) || categoryOf(c) == UTF8PROC_CATEGORY_MN || categoryOf(c) == UTF8PROC_CATEGORY_MC; }

std::string mapChars(const std::string &s, char32_t (*f)(char32_t)) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : decodeUtf8(s))
    appendUtf8(out, f(c));
  return out;
}

std::string pyTitle(const std::string &s) {
  std::string out;
  bool previousCased = false;
  for (char32_t c : decodeUtf8(s)) {
    appendUtf8(out, previousCased ? lowerOf(c) : titleOf(c));
    previousCased = isCased(c);
  }
  return out;
}

std::string pyCapitalize(const std::string &s) {
  std::u32string text = decodeUtf8(s);
  std::string out;
  for (size_t i = 0; i < text.size(); ++i)
    appendUtf8(out, i == 0 ? titleOf(text[i]) : lowerOf(text[i]));
  return out;
}

// jinja2's title filter: each run after -, whitespace, (, {, [ or < starts a word.
std::string jinjaTitle(const std::string &s) {
  std::string out;
  bool wordStart = true;
  for (char32_t c : decodeUtf8(s)) {
    bool separator = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || isPyWhitespace(c);
    if (separator) {
      appendUtf8(out, c);
      wordStart = true;
    } else {
      appendUtf8(out, wordStart ? upperOf(c) : lowerOf(c));
      wordStart = false;
    }
  }
  return out;
}

bool inChars(char32_t c, const std::u32string *chars) {
  return chars ? chars->find(c) != std::u32string::npos : isPyWhitespace(c);
}

std::string pyStrip(const std::string &s, const Value &charsArg, bool left, bool right) {
  std::u32string charsText;
  const std::u32string *chars = nullptr;
  if (!charsArg.isNone() && !charsArg.isUndefined()) {
    charsText = decodeUtf8(requireString(charsArg, "strip"));
    chars = &charsText;
  }
  std::u32string text = decodeUtf8(s);
  size_t begin = 0, end = text.size();
  if (left)
    while (begin < end && inChars(text[begin], chars))
      ++begin;
  if (right)
    while (end > begin && inChars(text[end - 1], chars))
      --end;
  return encodeUtf8(text.substr(begin, end - begin));
}

std::vector<Value> pySplit(const std::string &s, const Value &sepArg, int64_t maxsplit, bool fromRight) {
  std::vector<std::string> parts;
  if (sepArg.isNone() || sepArg.isUndefined()) {
    std::u32string text = decodeUtf8(s);
    if (fromRight)
      std::reverse(text.begin(), text.end());
    size_t i = 0;
    int64_t splits = 0;
    while (true) {
      while (i < text.size() && isPyWhitespace(text[i]))
        ++i;
      if (i >= text.size())
        break;
      if (maxsplit >= 0 && splits >= maxsplit) {
        size_t end = text.size();
        while (end > i && isPyWhitespace(text[end - 1]))
          --end;
        parts.push_back(encodeUtf8(text.substr(i, end - i)));
        break;
      }
      size_t j = i;
      while (j < text.size() && !isPyWhitespace(text[j]))
        ++j;
      parts.push_back(encodeUtf8(text.substr(i, j - i)));
      ++splits;
      i = j;
    }
    if (fromRight) {
      for (auto &part : parts) {
        std::u32string t = decodeUtf8(part);
        std::reverse(t.begin(), t.end());
        part = encodeUtf8(t);
      }
      std::reverse(parts.begin(), parts.end());
    }
  } else {
    const std::string &sep = requireString(sepArg, "split");
    if (sep.empty())
      fail("empty separator");
    if (!fromRight) {
      size_t start = 0;
      int64_t splits = 0;
      while (maxsplit < 0 || splits < maxsplit) {
        size_t at = s.find(sep, start);
        if (at == std::string::npos)
          break;
        parts.push_back(s.substr(start, at - start));
        start = at + sep.size();
        ++splits;
      }
      parts.push_back(s.substr(start));
    } else {
      size_t end = s.size();
      int64_t splits = 0;
      while (maxsplit < 0 || splits < maxsplit) {
        if (end < sep.size())
          break;
        size_t at = s.rfind(sep, end - sep.size());
        if (at == std::string::npos)
          break;
        parts.push_back(s.substr(at + sep.size(), end - at - sep.size()));
        end = at;
        ++splits;
      }
      parts.push_back(s.substr(0, end));
      std::reverse(parts.begin(), parts.end());
    }
  }
  std::vector<Value> out;
  for (auto &part : parts)
    out.push_back(Value::string(std::move(part)));
  return out;
}

std::string pyReplace(const std::string &s, const std::string &from, const std::string &to, int64_t count) {
  std::string out;
  if (from.empty()) {
    std::u32string text = decodeUtf8(s);
    int64_t done = 0;
    for (size_t i = 0; i <= text.size(); ++i) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      if (i < text.size())
        appendUtf8(out, text[i]);
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t at = s.find(from, start);
    if (at == std::string::npos)
      break;
    out.append(s, start, at - start);
    out += to;
    start = at + from.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  return out;
}

std::vector<std::string> splitLines(const std::string &s, bool keepEnds) {
  std::vector<std::string> lines;
  std::u32string text = decodeUtf8(s);
  size_t start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char32_t c = text[i];
    bool isBreak = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || (c >= 0x1C && c <= 0x1E) ||
                   c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!isBreak)
      continue;
    size_t end = i;
    if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n')
      ++i;
    lines.push_back(encodeUtf8(text.substr(start, (keepEnds ? i + 1 : end) - start)));
    start = i + 1;
  }
  if (start < text.size())
    lines.push_back(encodeUtf8(text.substr(start)));
  return lines;
}

std::string pad(const std::string &s, int64_t width, char32_t fill, char align) {
  int64_t length = int64_t(codepointCount(s));
  if (width <= length)
    return s;
  if (width > (int64_t(1) << 26))
    fail("padding width " + std::to_string(width) + " is too large");
  int64_t total = width - length, left = 0;
  if (align == '>')
    left = total;
  else if (align == '^')
    left = total / 2 + (total & width & 1); // CPython's str.center
  std::string fillText;
  appendUtf8(fillText, fill);
  std::string out;
  for (int64_t i = 0; i < left; ++i)
    out += fillText;
  out += s;
  for (int64_t i = 0; i < total - left; ++i)
    out += fillText;
  return out;
}

char32_t fillChar(const Params &p, size_t i) {
  if (!p.has(i))
    return ' ';
  std::u32string fill = decodeUtf8(requireString(p[i], "fillchar"));
  if (fill.size() != 1)
    fail("The fill character must be exactly one character long");
  return fill[0];
}

// Python's str[i:j] bounds for find/count/startswith: code points -> bytes.
size_t byteOffset(const std::string &s, int64_t index) {
  int64_t n = int64_t(codepointCount(s));
  if (index < 0)
    index = std::max<int64_t>(0, index + n);
  index = std::min(index, n);
  size_t byte = 0;
  for (int64_t seen = 0; byte < s.size(); ++byte) {
    if ((static_cast<unsigned char>(s[byte]) & 0xC0) != 0x80) {
      if (seen == index)
        break;
      ++seen;
    }
  }
  return byte;
}

std::string substrArgs(const std::string &s, const Params &p, size_t startIndex) {
  size_t begin = p.hasValue(startIndex) ? byteOffset(s, requireInt(p[startIndex], "start")) : 0;
  size_t end = p.hasValue(startIndex + 1) ? byteOffset(s, requireInt(p[startIndex + 1], "end")) : s.size();
  return begin < end ? s.substr(begin, end - begin) : std::string();
}

// ---- formatting --------------------------------------------------------------

std::string formatNumber(const char *spec, const Value &v, char type) {
  char buffer[512];
  if (type == 'd' || type == 'i' || type == 'u' || type == 'x' || type == 'X' || type == 'o') {
    int64_t i = v.isFloat() ? int64_t(v.asFloat()) : v.asInt();
    std::string s = std::string(spec) + "ll" + (type == 'i' || type == 'u' ? 'd' : type);
    std::snprintf(buffer, sizeof buffer, s.c_str(), (long long)i);
  } else {
    std::string s = std::string(spec) + type;
    std::snprintf(buffer, sizeof buffer, s.c_str(), v.asFloat());
  }
  return buffer;
}

// Python's printf-style `fmt % args` (the format filter and the % operator).
std::string percentFormat(const std::string &fmt, const Value &args) {
  std::vector<Value> positional;
  const DictData *mapping = args.isDict() ? &args.dict() : nullptr;
  if (args.isTuple())
    positional = args.items();
  else if (!mapping)
    positional.push_back(args);
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    if (++i >= fmt.size())
      fail("incomplete format");
    const Value *arg = nullptr;
    if (fmt[i] == '(') {
      size_t close = fmt.find(')', i);
      if (close == std::string::npos || !mapping)
        fail(mapping ? "incomplete format key" : "format requires a mapping");
      arg = mapping->find(fmt.substr(i + 1, close - i - 1));
      if (!arg)
        fail("KeyError: " + pyStringRepr(fmt.substr(i + 1, close - i - 1)));
      i = close + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::string("-+ #0").find(fmt[i]) != std::string::npos)
      flags += fmt[i++];
    std::string width, precision;
    while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i])))
      width += fmt[i++];
    if (i < fmt.size() && fmt[i] == '.') {
      precision = ".";
      ++i;
      while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i])))
        precision += fmt[i++];
    }
    if (i >= fmt.size())
      fail("incomplete format");
    char type = fmt[i];
    if (type == '%') {
      out += '%';
      continue;
    }
    if (!arg) {
      if (mapping)
        fail("format requires a mapping");
      if (next >= positional.size())
        fail("not enough arguments for format string");
      arg = &positional[next++];
    }
    if (type == 's' || type == 'r' || type == 'a') {
      std::string text = type == 's' ? toStr(*arg) : repr(*arg);
      if (precision.size() > 1 || precision == ".") {
        std::u32string t = decodeUtf8(text);
        text = encodeUtf8(t.substr(0, size_t(std::atoi(precision.c_str() + 1))));
      }
      int64_t w = width.empty() ? 0 : std::atoll(width.c_str());
      out += pad(text, w, ' ', flags.find('-') != std::string::npos ? '<' : '>');
    } else if (std::string("diuxXoeEfFgG").find(type) != std::string::npos) {
      if (!arg->isNumber())
        fail(std::string("%") + type + " format: a real number is required, not " + typeName(*arg));
      out += formatNumber(("%" + flags + width + precision).c_str(), *arg, type);
    } else if (type == 'c') {
      if (arg->isString())
        out += arg->str();
      else
        appendUtf8(out, char32_t(requireInt(*arg, "%c")));
    } else {
      fail(std::string("unsupported format character '") + type + "'");
    }
  }
  if (!mapping && next < positional.size())
    fail("not all arguments converted during string formatting");
  return out;
}

// One replacement field's spec for str.format: [[fill]align][sign][0][width][,][.precision][type].
std::string formatSpec(const Value &v, const std::string &spec) {
  size_t i = 0;
  std::u32string s = decodeUtf8(spec);
  char32_t fill = ' ';
  char align = 0;
  if (s.size() >= 2 && (s[1] == '<' || s[1] == '>' || s[1] == '^')) {
    fill = s[0];
    align = char(s[1]);
    i = 2;
  } else if (!s.empty() && (s[0] == '<' || s[0] == '>' || s[0] == '^')) {
    align = char(s[0]);
    i = 1;
  }
  std::string rest = encodeUtf8(s.substr(i));
  std::string sign, width, precision;
  size_t j = 0;
  if (j < rest.size() && (rest[j] == '+' || rest[j] == '-' || rest[j] == ' '))
    sign = rest[j++];
  bool zero = j < rest.size() && rest[j] == '0';
  while (j < rest.size() && std::isdigit(static_cast<unsigned char>(rest[j])))
    width += rest[j++];
  if (j < rest.size() && rest[j] == '.') {
    precision = ".";
    ++j;
    while (j < rest.size() && std::isdigit(static_cast<unsigned char>(rest[j])))
      precision += rest[j++];
  }
  char type = j < rest.size() ? rest[j] : 0;
  std::string body;
  if (v.isString() || (!v.isNumber())) {
    body = toStr(v);
    if (precision.size() > 1)
      body = encodeUtf8(decodeUtf8(body).substr(0, size_t(std::atoi(precision.c_str() + 1))));
    return pad(body, width.empty() ? 0 : std::atoll(width.c_str()), fill, align ? align : '<');
  }
  if (type == 0 && precision.empty())
    body = v.isBool() ? std::to_string(v.asInt()) : toStr(v);
  else
    body = formatNumber(("%" + sign + precision).c_str(), v, type ? type : (v.isFloat() ? 'g' : 'd'));
  if (!sign.empty() && sign != "-" && body[0] != '-' && type == 0)
    body = sign + body;
  if (zero && !align)
    return formatNumber(("%0" + sign + width + precision).c_str(), v, type ? type : (v.isFloat() ? 'f' : 'd'));
  return pad(body, width.empty() ? 0 : std::atoll(width.c_str()), fill, align ? align : '>');
}

// Python's str.format with {}, {0}, {name}, !r / !s and a format spec.
std::string strFormat(Renderer &r, const std::string &fmt, const CallArgs &args) {
  std::string out;
  size_t autoIndex = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}' ) {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}')
        ++i;
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos)
      fail("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close;
    std::string spec, conversion;
    if (size_t colon = field.find(':'); colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field.resize(colon);
    }
    if (size_t bang = field.find('!'); bang != std::string::npos) {
      conversion = field.substr(bang + 1);
      field.resize(bang);
    }
    std::string head = field.substr(0, field.find_first_of(".["));
    Value v;
    if (head.empty()) {
      if (autoIndex >= args.positional.size())
        fail("Replacement index " + std::to_string(autoIndex) + " out of range for positional args tuple");
      v = args.positional[autoIndex++];
    } else if (std::isdigit(static_cast<unsigned char>(head[0]))) {
      size_t index = size_t(std::atoll(head.c_str()));
      if (index >= args.positional.size())
        fail("Replacement index " + head + " out of range for positional args tuple");
      v = args.positional[index];
    } else {
      auto it = std::find_if(args.keyword.begin(), args.keyword.end(), [&](auto &kw) { return kw.first == head; });
      if (it == args.keyword.end())
        fail("KeyError: " + pyStringRepr(head));
      v = it->second;
    }
    for (size_t p = head.size(); p < field.size();) {
      if (field[p] == '.') {
        size_t end = field.find_first_of(".[", p + 1);
        v = r.getAttr(v, field.substr(p + 1, end == std::string::npos ? std::string::npos : end - p - 1));
        p = end == std::string::npos ? field.size() : end;
      } else {
        size_t end = field.find(']', p);
        if (end == std::string::npos)
          fail("Missing ']' in format string");
        std::string key = field.substr(p + 1, end - p - 1);
        bool digits = !key.empty() && key.find_first_not_of("0123456789") == std::string::npos;
        v = r.getItem(v, digits ? Value::integer(std::atoll(key.c_str())) : Value::string(key));
        p = end + 1;
      }
    }
    if (conversion == "r")
      v = Value::string(repr(v));
    else if (conversion == "s")
      v = Value::string(toStr(v));
    out += formatSpec(v, spec);
  }
  return out;
}

// ---- operators -----------------------------------------------------------------

int64_t checkedInt(bool overflow, int64_t value) {
  if (overflow)
    fail("integer overflow: the result does not fit in 64 bits");
  return value;
}

Value repeat(Renderer &r, const Value &sequence, int64_t times) {
  if (times <= 0)
    return sequence.isString() ? Value::string("") : Value::list({}, sequence.isTuple());
  size_t unit = sequence.isString() ? sequence.str().size() : sequence.items().size();
  if (unit > 0 && uint64_t(times) > uint64_t(r.options().limits.maxOutputBytes) / unit + 1)
    r.checkSize(size_t(-1));
  r.checkSize(unit * size_t(times));
  if (sequence.isString()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i)
      out += sequence.str();
    return Value::string(std::move(out));
  }
  std::vector<Value> items;
  for (int64_t i = 0; i < times; ++i)
    items.insert(items.end(), sequence.items().begin(), sequence.items().end());
  return Value::list(std::move(items), sequence.isTuple());
}

double pyFloorMod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0)))
    m += b;
  return m;
}

[[noreturn]] void unsupportedOperands(const std::string &op, const Value &a, const Value &b) {
  fail("unsupported operand type(s) for " + op + ": '" + typeName(a) + "' and '" + typeName(b) + "'");
}

Value arithmetic(const std::string &op, const Value &a, const Value &b) {
  bool useFloat = a.isFloat() || b.isFloat() || op == "/";
  if (op == "/" || op == "//" || op == "%")
    if (b.asFloat() == 0.0)
      fail(op == "/" ? "division by zero" : "integer division or modulo by zero");
  if (useFloat && op != "**") {
    double x = a.asFloat(), y = b.asFloat();
    if (op == "+")
      return Value::real(x + y);
    if (op == "-")
      return Value::real(x - y);
    if (op == "*")
      return Value::real(x * y);
    if (op == "/")
      return Value::real(x / y);
    if (op == "//")
      return Value::real(std::floor(x / y));
    return Value::real(pyFloorMod(x, y)); // %
  }
  if (op == "**") {
    if (!useFloat && b.asInt() >= 0) {
      int64_t result = 1, base = a.asInt();
      for (int64_t e = b.asInt(); e > 0; --e) {
        if (__builtin_mul_overflow(result, base, &result))
          fail("integer overflow: the result does not fit in 64 bits");
        if (result == 0 || result == 1)
          break;
      }
      return Value::integer(result);
    }
    if (a.asFloat() == 0.0 && b.asFloat() < 0)
      fail("0.0 cannot be raised to a negative power");
    return Value::real(std::pow(a.asFloat(), b.asFloat()));
  }
  int64_t x = a.asInt(), y = b.asInt(), result = 0;
  if (op == "+")
    return Value::integer(checkedInt(__builtin_add_overflow(x, y, &result), result));
  if (op == "-")
    return Value::integer(checkedInt(__builtin_sub_overflow(x, y, &result), result));
  if (op == "*")
    return Value::integer(checkedInt(__builtin_mul_overflow(x, y, &result), result));
  int64_t q = x / y, m = x % y;
  if (m != 0 && ((m < 0) != (y < 0))) {
    q -= 1;
    m += y;
  }
  return Value::integer(op == "//" ? q : m);
}

} // namespace

Value binaryOp(Renderer &r, const std::string &op, const Value &a, const Value &b) {
  if (op == "~")
    return Value::string(toStr(a) + toStr(b));
  if (a.isUndefined())
    failUndefined(a);
  if (b.isUndefined())
    failUndefined(b);
  if (a.isNumber() && b.isNumber())
    return arithmetic(op, a, b);
  if (op == "+") {
    if (a.isString() && b.isString())
      return Value::string(a.str() + b.str());
    if (a.isList() && b.isList() && a.isTuple() == b.isTuple()) {
      r.checkSize(a.items().size() + b.items().size());
      std::vector<Value> items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(items), a.isTuple());
    }
    if (a.isString())
      fail("can only concatenate str (not \"" + typeName(b) + "\") to str");
    if (a.isList())
      fail("can only concatenate " + typeName(a) + " (not \"" + typeName(b) + "\") to " + typeName(a));
  }
  if (op == "*") {
    if ((a.isString() || a.isList()) && (b.isInt() || b.isBool()))
      return repeat(r, a, b.asInt());
    if ((b.isString() || b.isList()) && (a.isInt() || a.isBool()))
      return repeat(r, b, a.asInt());
  }
  if (op == "%" && a.isString())
    return Value::string(percentFormat(a.str(), b));
  unsupportedOperands(op, a, b);
}

bool containsValue(const Value &container, const Value &needle) {
  switch (container.kind()) {
  case Value::Kind::String:
    if (!needle.isString())
      fail("'in <string>' requires string as left operand, not " + typeName(needle));
    return container.str().find(needle.str()) != std::string::npos;
  case Value::Kind::List:
    for (const Value &item : container.items())
      if (equals(item, needle))
        return true;
    return false;
  case Value::Kind::Dict:
    return container.dict().find(needle) != nullptr;
  case Value::Kind::Undefined:
    return false; // jinja2's Undefined iterates as empty
  default:
    fail("argument of type '" + typeName(container) + "' is not iterable");
  }
}

std::vector<Value> iterate(const Value &v) {
  switch (v.kind()) {
  case Value::Kind::List:
    return v.items();
  case Value::Kind::Dict: {
    std::vector<Value> keys;
    for (const auto &entry : v.dict().entries)
      keys.push_back(entry.first);
    return keys;
  }
  case Value::Kind::String: {
    std::vector<Value> chars;
    for (char32_t c : decodeUtf8(v.str())) {
      std::string s;
      appendUtf8(s, c);
      chars.push_back(Value::string(std::move(s)));
    }
    return chars;
  }
  case Value::Kind::Undefined:
    if (v.isUnsafeUndefined())
      failUndefined(v);
    return {};
  default:
    fail("'" + typeName(v) + "' object is not iterable");
  }
}

namespace {

int64_t lengthOf(const Value &v) {
  switch (v.kind()) {
  case Value::Kind::String:
    return int64_t(codepointCount(v.str()));
  case Value::Kind::List:
    return int64_t(v.items().size());
  case Value::Kind::Dict:
    return int64_t(v.dict().entries.size());
  case Value::Kind::Undefined:
    return 0;
  default:
    fail("object of type '" + typeName(v) + "' has no len()");
  }
}

Value makeList(std::vector<Value> items) { return Value::list(std::move(items)); }

// ---- methods -----------------------------------------------------------------

const char *const kStrMethods[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith", "upper",
    "lower", "title", "capitalize", "swapcase", "casefold", "replace", "find", "rfind", "index",
    "rindex", "count", "join", "format", "isdigit", "isnumeric", "isdecimal", "isalpha", "isalnum",
    "isspace", "isupper", "islower", "zfill", "ljust", "rjust", "center", "partition", "rpartition",
    "removeprefix", "removesuffix"};
const char *const kDictMethods[] = {"get", "keys", "values", "items", "copy"};
const char *const kDictUnsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};
const char *const kListMethods[] = {"index", "count", "copy"};
const char *const kListUnsafe[] = {"append", "clear", "pop", "reverse", "insert", "sort", "extend", "remove"};

template <size_t N> bool listed(const char *const (&names)[N], const std::string &name) {
  for (const char *n : names)
    if (name == n)
      return true;
  return false;
}

std::vector<std::string> prefixesOf(const Value &v, const char *what) {
  std::vector<std::string> out;
  if (v.isTuple()) {
    for (const Value &item : v.items())
      out.push_back(requireString(item, what));
  } else {
    out.push_back(requireString(v, what));
  }
  return out;
}

Value strMethod(Renderer &r, const std::string &s, const std::string &name, CallArgs &args) {
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Params p(name, args, {"chars"});
    return Value::string(pyStrip(s, p.get(0, Value::none()), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    Params p(name, args, {"sep", "maxsplit"});
    return makeList(pySplit(s, p.get(0, Value::none()), p.has(1) ? requireInt(p[1], "maxsplit") : -1,
                            name == "rsplit"));
  }
  if (name == "splitlines") {
    Params p(name, args, {"keepends"});
    std::vector<Value> out;
    for (auto &line : splitLines(s, truthy(p.get(0, Value::boolean(false)))))
      out.push_back(Value::string(line));
    return makeList(std::move(out));
  }
  if (name == "startswith" || name == "endswith") {
    Params p(name, args, {"prefix", "start", "end"});
    std::string text = substrArgs(s, p, 1);
    for (const std::string &affix : prefixesOf(p[0], name.c_str())) {
      bool match = text.size() >= affix.size() &&
                   (name == "startswith" ? text.compare(0, affix.size(), affix) == 0
                                         : text.compare(text.size() - affix.size(), affix.size(), affix) == 0);
      if (match)
        return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (name == "upper" || name == "lower" || name == "casefold" || name == "title" ||
      name == "capitalize" || name == "swapcase") {
    Params p(name, args, {});
    if (name == "upper")
      return Value::string(mapChars(s, upperOf));
    if (name == "lower" || name == "casefold")
      return Value::string(mapChars(s, lowerOf));
    if (name == "title")
      return Value::string(pyTitle(s));
    if (name == "capitalize")
      return Value::string(pyCapitalize(s));
    return Value::string(mapChars(s, [](char32_t c) { return upperOf(c) == c ? lowerOf(c) : upperOf(c); }));
  }
  if (name == "replace") {
    Params p(name, args, {"old", "new", "count"});
    return Value::string(pyReplace(s, requireString(p[0], "replace"), requireString(p[1], "replace"),
                                   p.has(2) ? requireInt(p[2], "count") : -1));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    Params p(name, args, {"sub", "start", "end"});
    const std::string &sub = requireString(p[0], name);
    size_t begin = p.hasValue(1) ? byteOffset(s, requireInt(p[1], "start")) : 0;
    size_t end = p.hasValue(2) ? byteOffset(s, requireInt(p[2], "end")) : s.size();
    std::string window = begin <= end ? s.substr(begin, end - begin) : std::string();
    if (name == "count") {
      if (sub.empty())
        return Value::integer(int64_t(codepointCount(window)) + 1);
      int64_t n = 0;
      for (size_t at = window.find(sub); at != std::string::npos; at = window.find(sub, at + sub.size()))
        ++n;
      return Value::integer(n);
    }
    size_t at = (name == "find" || name == "index") ? window.find(sub) : window.rfind(sub);
    if (at == std::string::npos) {
      if (name == "index" || name == "rindex")
        fail("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(int64_t(codepointCount(s.substr(0, begin + at))));
  }
  if (name == "join") {
    Params p(name, args, {"iterable"});
    std::string out;
    std::vector<Value> items = iterate(p[0]);
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].isString())
        fail("sequence item " + std::to_string(i) + ": expected str instance, " + typeName(items[i]) + " found");
      if (i)
        out += s;
      out += items[i].str();
      r.checkSize(out.size());
    }
    return Value::string(std::move(out));
  }
  if (name == "format")
    return Value::string(strFormat(r, s, args));
  if (name.rfind("is", 0) == 0) {
    Params p(name, args, {});
    std::u32string text = decodeUtf8(s);
    if (text.empty())
      return Value::boolean(false);
    bool (*test)(char32_t) = nullptr;
    if (name == "isdigit" || name == "isdecimal")
      test = isDecimal;
    else if (name == "isnumeric")
      test = isNumericChar;
    else if (name == "isalpha")
      test = isAlpha;
    else if (name == "isalnum")
      test = [](char32_t c) { return isAlpha(c) || isNumericChar(c); };
    else if (name == "isspace")
      test = isPyWhitespace;
    if (test)
      return Value::boolean(std::all_of(text.begin(), text.end(), test));
    bool cased = false;
    for (char32_t c : text) {
      if (!isCased(c))
        continue;
      cased = true;
      if ((name == "isupper") != (upperOf(c) == c && lowerOf(c) != c))
        return Value::boolean(false);
    }
    return Value::boolean(cased);
  }
  if (name == "zfill") {
    Params p(name, args, {"width"});
    int64_t width = requireInt(p[0], "zfill"), length = int64_t(codepointCount(s));
    if (width <= length)
      return Value::string(s);
    r.checkSize(size_t(width));
    size_t signLength = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
    return Value::string(s.substr(0, signLength) + std::string(size_t(width - length), '0') + s.substr(signLength));
  }
  if (name == "ljust" || name == "rjust" || name == "center") {
    Params p(name, args, {"width", "fillchar"});
    int64_t width = requireInt(p[0], name);
    r.checkSize(size_t(std::max<int64_t>(width, 0)));
    return Value::string(pad(s, width, fillChar(p, 1), name == "ljust" ? '<' : name == "rjust" ? '>' : '^'));
  }
  if (name == "partition" || name == "rpartition") {
    Params p(name, args, {"sep"});
    const std::string &sep = requireString(p[0], name);
    if (sep.empty())
      fail("empty separator");
    size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (at == std::string::npos)
      return name == "partition"
                 ? Value::list({Value::string(s), Value::string(""), Value::string("")}, true)
                 : Value::list({Value::string(""), Value::string(""), Value::string(s)}, true);
    return Value::list({Value::string(s.substr(0, at)), Value::string(sep), Value::string(s.substr(at + sep.size()))}, true);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    Params p(name, args, {"affix"});
    const std::string &affix = requireString(p[0], name);
    if (name == "removeprefix" && s.compare(0, affix.size(), affix) == 0)
      return Value::string(s.substr(affix.size()));
    if (name == "removesuffix" && !affix.empty() && s.size() >= affix.size() &&
        s.compare(s.size() - affix.size(), affix.size(), affix) == 0)
      return Value::string(s.substr(0, s.size() - affix.size()));
    return Value::string(s);
  }
  fail("'str' object has no attribute '" + name + "'");
}

std::vector<Value> itemTuples(const Value &dict) {
  std::vector<Value> out;
  for (const auto &[key, value] : dict.dict().entries)
    out.push_back(Value::list({key, value}, true));
  return out;
}

} // namespace

bool isMethodName(const Value &self, const std::string &name, bool &unsafe) {
  unsafe = false;
  if (self.isString())
    return listed(kStrMethods, name);
  if (self.isDict()) {
    unsafe = listed(kDictUnsafe, name);
    return unsafe || listed(kDictMethods, name);
  }
  if (self.isList()) {
    unsafe = !self.isTuple() && listed(kListUnsafe, name);
    return unsafe || listed(kListMethods, name);
  }
  return false;
}

Value callMethod(Renderer &r, const Value &self, const std::string &name, CallArgs &args) {
  if (self.isString())
    return strMethod(r, self.str(), name, args);
  if (self.isDict()) {
    if (name == "get") {
      Params p(name, args, {"key", "default"});
      const Value *v = self.dict().find(p[0]);
      return v ? *v : p.get(1, Value::none());
    }
    Params p(name, args, {});
    if (name == "keys")
      return makeList(iterate(self));
    if (name == "values") {
      std::vector<Value> out;
      for (const auto &entry : self.dict().entries)
        out.push_back(entry.second);
      return makeList(std::move(out));
    }
    if (name == "items")
      return makeList(itemTuples(self));
    return self; // copy: values are immutable
  }
  if (name == "copy")
    return Value::list(self.items());
  Params p(name, args, {"value"});
  const auto &items = self.items();
  if (name == "count")
    return Value::integer(std::count_if(items.begin(), items.end(), [&](const Value &v) { return equals(v, p[0]); }));
  for (size_t i = 0; i < items.size(); ++i)
    if (equals(items[i], p[0]))
      return Value::integer(int64_t(i));
  fail(repr(p[0]) + " is not in list");
}

Value sliceValue(const Value &object, const Value &startArg, const Value &stopArg, const Value &stepArg) {
  int64_t step = stepArg.isNone() ? 1 : requireInt(stepArg, "slice step");
  if (step == 0)
    fail("slice step cannot be zero");
  std::u32string text;
  int64_t n;
  if (object.isString()) {
    text = decodeUtf8(object.str());
    n = int64_t(text.size());
  } else if (object.isList()) {
    n = int64_t(object.items().size());
  } else {
    return Value::undefined("'" + typeName(object) + "' object is not subscriptable");
  }
  auto clamp = [&](const Value &v, int64_t fallback) {
    if (v.isNone())
      return fallback;
    int64_t i = requireInt(v, "slice index");
    if (i < 0)
      i += n;
    if (step > 0)
      return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  int64_t start = clamp(startArg, step > 0 ? 0 : n - 1);
  int64_t stop = clamp(stopArg, step > 0 ? n : -1);
  std::vector<size_t> picks;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
    picks.push_back(size_t(i));
  if (object.isString()) {
    std::u32string out;
    for (size_t i : picks)
      out += text[i];
    return Value::string(encodeUtf8(out));
  }
  std::vector<Value> items;
  for (size_t i : picks)
    items.push_back(object.items()[i]);
  return Value::list(std::move(items), object.isTuple());
}

namespace {

// ---- filters -----------------------------------------------------------------

using FilterFn = Value (*)(Renderer &, const Value &, CallArgs &);
using TestFn = bool (*)(Renderer &, const Value &, CallArgs &);

std::string softStr(const Value &v) { return toStr(v); }

// jinja2's attribute getter for filters: "a.b.0" walks getitem per part.
Value attributeOf(Renderer &r, const Value &item, const std::string &path) {
  Value v = item;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    v = r.getItem(v, digits ? Value::integer(std::atoll(part.c_str())) : Value::string(part));
    if (dot == std::string::npos)
      return v;
    start = dot + 1;
  }
}

Value sortKey(Renderer &r, const Value &item, const Value &attribute, bool caseSensitive) {
  Value key = item;
  if (!attribute.isNone() && !attribute.isUndefined()) {
    if (attribute.isString() && attribute.str().find(',') != std::string::npos) {
      std::vector<Value> parts;
      for (const Value &part : pySplit(attribute.str(), Value::string(","), -1, false))
        parts.push_back(sortKey(r, item, Value::string(pyStrip(part.str(), Value::none(), true, true)), caseSensitive));
      return Value::list(std::move(parts), true);
    }
    key = attribute.isString() ? attributeOf(r, item, attribute.str()) : r.getItem(item, attribute);
  }
  if (!caseSensitive && key.isString())
    return Value::string(mapChars(key.str(), lowerOf));
  return key;
}

Value fDefault(Renderer &, const Value &v, CallArgs &args) {
  Params p("default", args, {"default_value", "boolean"});
  bool boolean = truthy(p.get(1, Value::boolean(false)));
  if (v.isUndefined() || (boolean && !truthy(v)))
    return p.get(0, Value::string(""));
  return v;
}

Value fLength(Renderer &, const Value &v, CallArgs &args) {
  Params p("length", args, {});
  return Value::integer(lengthOf(v));
}

Value fString(Renderer &, const Value &v, CallArgs &args) {
  Params p("string", args, {});
  return Value::string(softStr(v));
}

Value fUpper(Renderer &, const Value &v, CallArgs &args) {
  Params p("upper", args, {});
  return Value::string(mapChars(softStr(v), upperOf));
}

Value fLower(Renderer &, const Value &v, CallArgs &args) {
  Params p("lower", args, {});
  return Value::string(mapChars(softStr(v), lowerOf));
}

Value fCapitalize(Renderer &, const Value &v, CallArgs &args) {
  Params p("capitalize", args, {});
  return Value::string(pyCapitalize(softStr(v)));
}

Value fTitle(Renderer &, const Value &v, CallArgs &args) {
  Params p("title", args, {});
  return Value::string(jinjaTitle(softStr(v)));
}

Value fTrim(Renderer &, const Value &v, CallArgs &args) {
  Params p("trim", args, {"chars"});
  return Value::string(pyStrip(softStr(v), p.get(0, Value::none()), true, true));
}

Value fReplace(Renderer &, const Value &v, CallArgs &args) {
  Params p("replace", args, {"old", "new", "count"});
  return Value::string(pyReplace(softStr(v), softStr(p[0]), softStr(p[1]),
                                 p.hasValue(2) ? requireInt(p[2], "count") : -1));
}

Value fTojson(Renderer &, const Value &v, CallArgs &args) {
  // transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  Params p("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  if (p.has(0) && truthy(p[0]))
    fail("tojson(ensure_ascii=True) is not supported; chat templates render unicode as is");
  JsonDumpOptions o;
  if (p.hasValue(1)) {
    o.hasIndent = true;
    if (p[1].isString())
      o.indent = p[1].str();
    else
      o.indent = std::string(size_t(std::clamp<int64_t>(requireInt(p[1], "tojson indent"), 0, 64)), ' ');
    o.itemSeparator = ",";
  }
  if (p.hasValue(2)) {
    std::vector<Value> seps = iterate(p[2]);
    if (seps.size() != 2)
      fail("tojson separators: expected (item_separator, key_separator)");
    o.itemSeparator = requireString(seps[0], "tojson separators");
    o.keySeparator = requireString(seps[1], "tojson separators");
  }
  o.sortKeys = truthy(p.get(3, Value::boolean(false)));
  return Value::string(toJsonText(v, o));
}

Value fItems(Renderer &, const Value &v, CallArgs &args) {
  Params p("items", args, {});
  if (v.isUndefined())
    return makeList({});
  if (!v.isDict())
    fail("Can only get item pairs from a mapping.");
  return makeList(itemTuples(v));
}

Value fJoin(Renderer &r, const Value &v, CallArgs &args) {
  Params p("join", args, {"d", "attribute"});
  std::string sep = p.has(0) ? softStr(p[0]) : "";
  std::string out;
  bool first = true;
  for (const Value &item : iterate(v)) {
    if (!first)
      out += sep;
    first = false;
    out += softStr(p.hasValue(1) ? attributeOf(r, item, softStr(p[1])) : item);
    r.checkSize(out.size());
  }
  return Value::string(std::move(out));
}

Value fFirst(Renderer &, const Value &v, CallArgs &args) {
  Params p("first", args, {});
  std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value fLast(Renderer &, const Value &v, CallArgs &args) {
  Params p("last", args, {});
  std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

Value fList(Renderer &, const Value &v, CallArgs &args) {
  Params p("list", args, {});
  return makeList(iterate(v));
}

Value fReverse(Renderer &, const Value &v, CallArgs &args) {
  Params p("reverse", args, {});
  if (v.isString()) {
    std::u32string text = decodeUtf8(v.str());
    std::reverse(text.begin(), text.end());
    return Value::string(encodeUtf8(text));
  }
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  return makeList(std::move(items));
}

Value fMap(Renderer &r, const Value &v, CallArgs &args) {
  std::vector<Value> out;
  auto attribute = std::find_if(args.keyword.begin(), args.keyword.end(), [](auto &kw) { return kw.first == "attribute"; });
  if (args.positional.empty() && attribute != args.keyword.end()) {
    Params p("map", args, {"attribute", "default"});
    for (const Value &item : iterate(v)) {
      Value x = attributeOf(r, item, softStr(p[0]));
      out.push_back(x.isUndefined() && p.has(1) ? p[1] : x);
    }
    return makeList(std::move(out));
  }
  if (args.positional.empty())
    fail("map requires a filter argument");
  std::string filter = requireString(args.positional[0], "map");
  if (!filterExists(filter))
    fail("no filter named '" + filter + "'");
  CallArgs rest{std::vector<Value>(args.positional.begin() + 1, args.positional.end()), args.keyword};
  for (const Value &item : iterate(v)) {
    CallArgs copy = rest;
    out.push_back(r.applyFilter(filter, item, copy));
  }
  return makeList(std::move(out));
}

// select/reject/selectattr/rejectattr: `attr` false for the plain forms.
Value selectOrReject(Renderer &r, const Value &v, CallArgs &args, bool attr, bool select) {
  size_t first = attr ? 1 : 0;
  if (attr && args.positional.empty())
    fail("selectattr/rejectattr need an attribute name");
  std::string attribute = attr ? softStr(args.positional[0]) : "";
  std::string test;
  if (args.positional.size() > first) {
    test = requireString(args.positional[first], "test name");
    if (!testExists(test))
      fail("no test named '" + test + "'");
  }
  CallArgs rest{std::vector<Value>(args.positional.begin() + std::min(args.positional.size(), first + 1), args.positional.end()),
                args.keyword};
  std::vector<Value> out;
  for (const Value &item : iterate(v)) {
    Value x = attr ? attributeOf(r, item, attribute) : item;
    bool pass;
    if (test.empty()) {
      pass = truthy(x);
    } else {
      CallArgs copy = rest;
      pass = r.applyTest(test, x, copy);
    }
    if (pass == select)
      out.push_back(item);
  }
  return makeList(std::move(out));
}

Value fSelect(Renderer &r, const Value &v, CallArgs &a) { return selectOrReject(r, v, a, false, true); }
Value fReject(Renderer &r, const Value &v, CallArgs &a) { return selectOrReject(r, v, a, false, false); }
Value fSelectattr(Renderer &r, const Value &v, CallArgs &a) { return selectOrReject(r, v, a, true, true); }
Value fRejectattr(Renderer &r, const Value &v, CallArgs &a) { return selectOrReject(r, v, a, true, false); }

Value toInt(const Value &v, const Value &fallback, int base) {
  if (v.isInt() || v.isBool())
    return Value::integer(v.asInt());
  if (v.isFloat()) {
    double d = v.asFloat();
    if (!std::isfinite(d) || std::fabs(d) > 9.2e18)
      return fallback;
    return Value::integer(int64_t(d));
  }
  if (v.isString()) {
    std::string text = pyStrip(v.str(), Value::none(), true, true);
    std::string digits;
    for (char c : text)
      if (c != '_')
        digits += c;
    if (!digits.empty()) {
      errno = 0;
      char *end = nullptr;
      long long i = std::strtoll(digits.c_str(), &end, base);
      if (*end == 0 && errno == 0)
        return Value::integer(i);
      double d = std::strtod(digits.c_str(), &end);
      if (*end == 0 && std::isfinite(d) && std::fabs(d) < 9.2e18)
        return Value::integer(int64_t(d));
    }
  }
  return fallback;
}

Value fInt(Renderer &, const Value &v, CallArgs &args) {
  Params p("int", args, {"default", "base"});
  return toInt(v, p.get(0, Value::integer(0)), p.has(1) ? int(requireInt(p[1], "base")) : 10);
}

Value fFloat(Renderer &, const Value &v, CallArgs &args) {
  Params p("float", args, {"default"});
  if (v.isNumber())
    return Value::real(v.asFloat());
  if (v.isString()) {
    std::string text = pyStrip(v.str(), Value::none(), true, true);
    char *end = nullptr;
    double d = std::strtod(text.c_str(), &end);
    if (!text.empty() && *end == 0)
      return Value::real(d);
  }
  return p.get(0, Value::real(0.0));
}

Value fAbs(Renderer &, const Value &v, CallArgs &args) {
  Params p("abs", args, {});
  if (v.isFloat())
    return Value::real(std::fabs(v.asFloat()));
  if (v.isNumber())
    return Value::integer(v.asInt() < 0 ? -v.asInt() : v.asInt());
  fail("bad operand type for abs(): '" + typeName(v) + "'");
}

Value fRound(Renderer &, const Value &v, CallArgs &args) {
  Params p("round", args, {"precision", "method"});
  int64_t precision = p.has(0) ? requireInt(p[0], "precision") : 0;
  std::string method = p.has(1) ? softStr(p[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    fail("method must be common, ceil or floor");
  if (!v.isNumber())
    fail("type " + typeName(v) + " doesn't define __round__ method");
  if (method == "common" && !v.isFloat())
    return Value::integer(v.asInt());
  double scale = std::pow(10.0, double(precision)), x = v.asFloat() * scale;
  double rounded = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
  return Value::real(rounded / scale);
}

Value fIndent(Renderer &, const Value &v, CallArgs &args) {
  Params p("indent", args, {"width", "first", "blank"});
  std::string indentation = p.has(0) && p[0].isString() ? p[0].str()
                                                         : std::string(size_t(std::clamp<int64_t>(p.has(0) ? requireInt(p[0], "width") : 4, 0, 1024)), ' ');
  bool first = truthy(p.get(1, Value::boolean(false))), blank = truthy(p.get(2, Value::boolean(false)));
  std::vector<std::string> lines = splitLines(softStr(v) + "\n", false);
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i) {
      out += "\n";
      if (blank || !lines[i].empty())
        out += indentation;
    }
    out += lines[i];
  }
  if (first)
    out = indentation + out;
  return Value::string(std::move(out));
}

Value fIdentity(Renderer &, const Value &v, CallArgs &) { return v; }

Value fEscape(Renderer &, const Value &v, CallArgs &args) {
  Params p("escape", args, {});
  std::string out;
  for (char c : softStr(v)) {
    switch (c) {
    case '&': out += "&amp;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '"': out += "&#34;"; break;
    case '\'': out += "&#39;"; break;
    default: out += c;
    }
  }
  return Value::string(std::move(out));
}

Value fUnique(Renderer &r, const Value &v, CallArgs &args) {
  Params p("unique", args, {"case_sensitive", "attribute"});
  bool caseSensitive = truthy(p.get(0, Value::boolean(false)));
  std::vector<Value> out, seen;
  for (const Value &item : iterate(v)) {
    Value key = sortKey(r, item, p.get(1, Value::none()), caseSensitive);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value &s) { return equals(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return makeList(std::move(out));
}

Value fSort(Renderer &r, const Value &v, CallArgs &args) {
  Params p("sort", args, {"reverse", "case_sensitive", "attribute"});
  bool reverse = truthy(p.get(0, Value::boolean(false)));
  bool caseSensitive = truthy(p.get(1, Value::boolean(false)));
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value &item : iterate(v))
    keyed.emplace_back(sortKey(r, item, p.get(2, Value::none()), caseSensitive), item);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto &a, const auto &b) {
    return reverse ? compare(b.first, a.first) < 0 : compare(a.first, b.first) < 0;
  });
  std::vector<Value> out;
  for (auto &entry : keyed)
    out.push_back(entry.second);
  return makeList(std::move(out));
}

Value fDictsort(Renderer &, const Value &v, CallArgs &args) {
  Params p("dictsort", args, {"case_sensitive", "by", "reverse"});
  if (!v.isDict())
    fail("dictsort: expected a mapping, got " + typeName(v));
  bool caseSensitive = truthy(p.get(0, Value::boolean(false)));
  std::string by = p.has(1) ? softStr(p[1]) : "key";
  if (by != "key" && by != "value")
    fail("You can only sort by either 'key' or 'value'");
  bool reverse = truthy(p.get(2, Value::boolean(false)));
  std::vector<Value> items = itemTuples(v);
  auto key = [&](const Value &item) {
    Value k = item.items()[by == "key" ? 0 : 1];
    return !caseSensitive && k.isString() ? Value::string(mapChars(k.str(), lowerOf)) : k;
  };
  std::stable_sort(items.begin(), items.end(), [&](const Value &a, const Value &b) {
    return reverse ? compare(key(b), key(a)) < 0 : compare(key(a), key(b)) < 0;
  });
  return makeList(std::move(items));
}

Value fBatch(Renderer &, const Value &v, CallArgs &args) {
  Params p("batch", args, {"linecount", "fill_with"});
  int64_t size = requireInt(p[0], "batch");
  if (size <= 0)
    fail("batch: linecount must be positive");
  std::vector<Value> out, current;
  for (const Value &item : iterate(v)) {
    current.push_back(item);
    if (int64_t(current.size()) == size)
      out.push_back(makeList(std::move(current))), current.clear();
  }
  if (!current.empty()) {
    if (p.hasValue(1))
      while (int64_t(current.size()) < size)
        current.push_back(p[1]);
    out.push_back(makeList(std::move(current)));
  }
  return makeList(std::move(out));
}

Value fWordcount(Renderer &, const Value &v, CallArgs &args) {
  Params p("wordcount", args, {});
  int64_t words = 0;
  bool inWord = false;
  for (char32_t c : decodeUtf8(softStr(v))) {
    bool w = isWordChar(c);
    if (w && !inWord)
      ++words;
    inWord = w;
  }
  return Value::integer(words);
}

Value fCenter(Renderer &r, const Value &v, CallArgs &args) {
  Params p("center", args, {"width"});
  int64_t width = p.has(0) ? requireInt(p[0], "center") : 80;
  r.checkSize(size_t(std::max<int64_t>(width, 0)));
  return Value::string(pad(softStr(v), width, ' ', '^'));
}

Value fFormat(Renderer &, const Value &v, CallArgs &args) {
  if (!args.positional.empty() && !args.keyword.empty())
    fail("can't handle positional and keyword arguments at the same time");
  if (!args.keyword.empty()) {
    DictData d;
    for (auto &[key, value] : args.keyword)
      d.set(Value::string(key), value);
    return Value::string(percentFormat(softStr(v), Value::dict(std::move(d))));
  }
  return Value::string(percentFormat(softStr(v), Value::list(args.positional, true)));
}

Value aggregate(Renderer &r, const Value &v, CallArgs &args, const char *name, bool wantMax) {
  Params p(name, args, {"case_sensitive", "attribute"});
  bool caseSensitive = truthy(p.get(0, Value::boolean(false)));
  std::vector<Value> items = iterate(v);
  if (items.empty())
    return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value bestKey = sortKey(r, items[0], p.get(1, Value::none()), caseSensitive);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = sortKey(r, items[i], p.get(1, Value::none()), caseSensitive);
    if (wantMax ? compare(key, bestKey) > 0 : compare(key, bestKey) < 0)
      best = i, bestKey = key;
  }
  return items[best];
}

Value fMax(Renderer &r, const Value &v, CallArgs &a) { return aggregate(r, v, a, "max", true); }
Value fMin(Renderer &r, const Value &v, CallArgs &a) { return aggregate(r, v, a, "min", false); }

Value fSum(Renderer &r, const Value &v, CallArgs &args) {
  Params p("sum", args, {"attribute", "start"});
  Value total = p.get(1, Value::integer(0));
  for (const Value &item : iterate(v))
    total = binaryOp(r, "+", total, p.hasValue(0) ? attributeOf(r, item, softStr(p[0])) : item);
  return total;
}

Value fAttr(Renderer &r, const Value &v, CallArgs &args) {
  Params p("attr", args, {"name"});
  return r.getAttr(v, requireString(p[0], "attr"));
}

Value fTruncate(Renderer &, const Value &v, CallArgs &args) {
  Params p("truncate", args, {"length", "killwords", "end", "leeway"});
  int64_t length = p.has(0) ? requireInt(p[0], "length") : 255;
  bool killwords = truthy(p.get(1, Value::boolean(false)));
  std::string end = p.has(2) ? softStr(p[2]) : "...";
  int64_t leeway = p.hasValue(3) ? requireInt(p[3], "leeway") : 5;
  std::u32string text = decodeUtf8(softStr(v));
  int64_t endLength = int64_t(codepointCount(end));
  if (int64_t(text.size()) <= length + leeway)
    return Value::string(encodeUtf8(text));
  std::u32string kept = text.substr(0, size_t(std::max<int64_t>(0, length - endLength)));
  if (killwords)
    return Value::string(encodeUtf8(kept) + end);
  size_t space = kept.rfind(U' ');
  if (space != std::u32string::npos)
    kept.resize(space);
  return Value::string(encodeUtf8(kept) + end);
}

const std::unordered_map<std::string, FilterFn> &filterTable() {
  static const std::unordered_map<std::string, FilterFn> table = {
      {"abs", fAbs}, {"attr", fAttr}, {"batch", fBatch}, {"capitalize", fCapitalize},
      {"center", fCenter}, {"count", fLength}, {"d", fDefault}, {"default", fDefault},
      {"dictsort", fDictsort}, {"e", fEscape}, {"escape", fEscape}, {"first", fFirst},
      {"float", fFloat}, {"forceescape", fEscape}, {"format", fFormat}, {"indent", fIndent},
      {"int", fInt}, {"items", fItems}, {"join", fJoin}, {"last", fLast}, {"length", fLength},
      {"list", fList}, {"lower", fLower}, {"map", fMap}, {"max", fMax}, {"min", fMin},
      {"reject", fReject}, {"rejectattr", fRejectattr}, {"replace", fReplace},
      {"reverse", fReverse}, {"round", fRound}, {"safe", fIdentity}, {"select", fSelect},
      {"selectattr", fSelectattr}, {"sort", fSort}, {"string", fString}, {"sum", fSum},
      {"title", fTitle}, {"tojson", fTojson}, {"trim", fTrim}, {"truncate", fTruncate},
      {"unique", fUnique}, {"upper", fUpper}, {"wordcount", fWordcount},
  };
  return table;
}

// ---- tests -------------------------------------------------------------------

const Value &testArg(const CallArgs &args, const char *name) {
  if (args.positional.empty())
    fail(std::string("test '") + name + "' needs an argument");
  return args.positional[0];
}

bool tDefined(Renderer &, const Value &v, CallArgs &) { return !v.isUndefined(); }
bool tUndefined(Renderer &, const Value &v, CallArgs &) { return v.isUndefined(); }
bool tNone(Renderer &, const Value &v, CallArgs &) { return v.isNone(); }
bool tBoolean(Renderer &, const Value &v, CallArgs &) { return v.isBool(); }
bool tTrue(Renderer &, const Value &v, CallArgs &) { return v.isBool() && v.asBool(); }
bool tFalse(Renderer &, const Value &v, CallArgs &) { return v.isBool() && !v.asBool(); }
bool tInteger(Renderer &, const Value &v, CallArgs &) { return v.isInt(); }
bool tFloat(Renderer &, const Value &v, CallArgs &) { return v.isFloat(); }
bool tNumber(Renderer &, const Value &v, CallArgs &) { return v.isNumber(); }
bool tString(Renderer &, const Value &v, CallArgs &) { return v.isString(); }
bool tMapping(Renderer &, const Value &v, CallArgs &) { return v.isDict(); }
bool tIterable(Renderer &, const Value &v, CallArgs &) {
  return v.isString() || v.isList() || v.isDict() || v.isUndefined();
}
bool tSequence(Renderer &, const Value &v, CallArgs &) {
  return v.isString() || v.isList() || v.isDict() || v.isUndefined();
}
bool tCallable(Renderer &, const Value &v, CallArgs &) { return v.isObject() && v.object()->callable(); }
bool tOdd(Renderer &, const Value &v, CallArgs &) { return requireInt(v, "odd") % 2 != 0; }
bool tEven(Renderer &, const Value &v, CallArgs &) { return requireInt(v, "even") % 2 == 0; }
bool tDivisibleby(Renderer &, const Value &v, CallArgs &a) {
  int64_t d = requireInt(testArg(a, "divisibleby"), "divisibleby");
  if (d == 0)
    fail("integer division or modulo by zero");
  return requireInt(v, "divisibleby") % d == 0;
}
bool tEq(Renderer &, const Value &v, CallArgs &a) { return equals(v, testArg(a, "eq")); }
bool tNe(Renderer &, const Value &v, CallArgs &a) { return !equals(v, testArg(a, "ne")); }
bool tLt(Renderer &, const Value &v, CallArgs &a) { return compare(v, testArg(a, "lt")) < 0; }
bool tLe(Renderer &, const Value &v, CallArgs &a) { return compare(v, testArg(a, "le")) <= 0; }
bool tGt(Renderer &, const Value &v, CallArgs &a) { return compare(v, testArg(a, "gt")) > 0; }
bool tGe(Renderer &, const Value &v, CallArgs &a) { return compare(v, testArg(a, "ge")) >= 0; }
bool tIn(Renderer &, const Value &v, CallArgs &a) { return containsValue(testArg(a, "in"), v); }
bool tLower(Renderer &, const Value &v, CallArgs &) {
  return v.isString() && v.str() == mapChars(v.str(), lowerOf);
}
bool tUpper(Renderer &, const Value &v, CallArgs &) {
  return v.isString() && v.str() == mapChars(v.str(), upperOf);
}
bool tSameas(Renderer &, const Value &v, CallArgs &a) {
  const Value &other = testArg(a, "sameas");
  if (v.kind() != other.kind())
    return false;
  if (v.isNone() || v.isBool() || v.isUndefined())
    return v.isNone() || v.isUndefined() || v.asBool() == other.asBool();
  if (v.isObject())
    return v.object() == other.object();
  return false;
}
bool tEscaped(Renderer &, const Value &, CallArgs &) { return false; }
bool tFilter(Renderer &, const Value &v, CallArgs &) { return v.isString() && filterExists(v.str()); }
bool tTest(Renderer &, const Value &v, CallArgs &) { return v.isString() && testExists(v.str()); }

const std::unordered_map<std::string, TestFn> &testTable() {
  static const std::unordered_map<std::string, TestFn> table = {
      {"boolean", tBoolean}, {"callable", tCallable}, {"defined", tDefined},
      {"divisibleby", tDivisibleby}, {"eq", tEq}, {"equalto", tEq}, {"==", tEq},
      {"escaped", tEscaped}, {"even", tEven}, {"false", tFalse}, {"filter", tFilter},
      {"float", tFloat}, {"ge", tGe}, {">=", tGe}, {"gt", tGt}, {"greaterthan", tGt}, {">", tGt},
      {"in", tIn}, {"integer", tInteger}, {"iterable", tIterable}, {"le", tLe}, {"<=", tLe},
      {"lower", tLower}, {"lt", tLt}, {"lessthan", tLt}, {"<", tLt}, {"mapping", tMapping},
      {"ne", tNe}, {"!=", tNe}, {"none", tNone}, {"number", tNumber}, {"odd", tOdd},
      {"sameas", tSameas}, {"sequence", tSequence}, {"string", tString}, {"test", tTest},
      {"true", tTrue}, {"undefined", tUndefined}, {"upper", tUpper},
  };
  return table;
}

// ---- globals -----------------------------------------------------------------

class Cycler : public Object {
public:
  explicit Cycler(std::vector<Value> items) : items_(std::move(items)) {}
  std::string typeName() const override { return "Cycler"; }
  std::string repr() const override { return "<Cycler>"; }
  Value getAttr(const std::string &name) const override {
    auto self = const_cast<Cycler *>(this);
    if (name == "current")
      return items_[position_];
    if (name == "next")
      return Value::object(std::make_shared<Function>("next", [self](Renderer &, CallArgs &) {
        Value v = self->items_[self->position_];
        self->position_ = (self->position_ + 1) % self->items_.size();
        return v;
      }));
    if (name == "reset")
      return Value::object(std::make_shared<Function>("reset", [self](Renderer &, CallArgs &) {
        self->position_ = 0;
        return Value::none();
      }));
    return Object::getAttr(name);
  }

private:
  std::vector<Value> items_;
  size_t position_ = 0;
};

Value function(std::string name, Function::Body body) {
  return Value::object(std::make_shared<Function>(std::move(name), std::move(body)));
}

Value globalRange(Renderer &r, CallArgs &args) {
  if (!args.keyword.empty())
    fail("range() takes no keyword arguments");
  std::vector<int64_t> a;
  for (const Value &v : args.positional)
    a.push_back(requireInt(v, "range"));
  if (a.empty() || a.size() > 3)
    fail("range expected 1 to 3 arguments, got " + std::to_string(a.size()));
  int64_t start = a.size() > 1 ? a[0] : 0, stop = a.size() > 1 ? a[1] : a[0], step = a.size() > 2 ? a[2] : 1;
  if (step == 0)
    fail("range() arg 3 must not be zero");
  double count = std::max(0.0, std::ceil((double(stop) - double(start)) / double(step)));
  if (count > 100000)
    fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  r.checkSize(size_t(count));
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step)
    items.push_back(Value::integer(i));
  return makeList(std::move(items));
}

Value globalDict(Renderer &, CallArgs &args) {
  DictData d;
  if (args.positional.size() > 1)
    fail("dict expected at most 1 argument, got " + std::to_string(args.positional.size()));
  if (!args.positional.empty()) {
    const Value &from = args.positional[0];
    if (from.isDict())
      d = from.dict();
    else
      for (const Value &pair : iterate(from)) {
        std::vector<Value> kv = iterate(pair);
        if (kv.size() != 2)
          fail("dictionary update sequence element has length " + std::to_string(kv.size()) + "; 2 is required");
        d.set(kv[0], kv[1]);
      }
  }
  for (auto &[key, value] : args.keyword)
    d.set(Value::string(key), value);
  return Value::dict(std::move(d));
}

std::string strftimeText(const std::string &format, std::time_t when, bool utc) {
  std::tm parts{};
  if (utc)
    gmtime_r(&when, &parts);
  else
    localtime_r(&when, &parts);
  if (format.empty())
    return "";
  std::string buffer(256 + format.size() * 8, '\0');
  size_t n = std::strftime(buffer.data(), buffer.size(), format.c_str(), &parts);
  buffer.resize(n);
  return buffer;
}

} // namespace

Value callFilter(Renderer &r, const std::string &name, const Value &input, CallArgs &args) {
  auto it = filterTable().find(name);
  if (it == filterTable().end())
    fail("no filter named '" + name + "'");
  if (input.isUnsafeUndefined())
    failUndefined(input);
  return it->second(r, input, args);
}

bool callTest(Renderer &r, const std::string &name, const Value &input, CallArgs &args) {
  auto it = testTable().find(name);
  if (it == testTable().end())
    fail("no test named '" + name + "'");
  return it->second(r, input, args);
}

bool filterExists(const std::string &name) { return filterTable().count(name) != 0; }
bool testExists(const std::string &name) { return testTable().count(name) != 0; }

void addGlobals(Scope &scope, const RenderOptions &options) {
  scope.set("range", function("range", globalRange));
  scope.set("dict", function("dict", globalDict));
  scope.set("namespace", function("namespace", [](Renderer &r, CallArgs &args) {
    std::shared_ptr<Namespace> ns = r.newNamespace();
    ns->attributes = globalDict(r, args).dict();
    return Value::object(ns);
  }));
  scope.set("cycler", function("cycler", [](Renderer &, CallArgs &args) {
    if (args.positional.empty())
      fail("cycler() needs at least one item");
    return Value::object(std::make_shared<Cycler>(args.positional));
  }));
  scope.set("joiner", function("joiner", [](Renderer &, CallArgs &args) {
    Params p("joiner", args, {"sep"});
    std::string sep = p.has(0) ? softStr(p[0]) : ", ";
    auto used = std::make_shared<bool>(false);
    return function("joiner", [sep, used](Renderer &, CallArgs &) {
      bool first = !*used;
      *used = true;
      return Value::string(first ? "" : sep);
    });
  }));
  scope.set("raise_exception", function("raise_exception", [](Renderer &, CallArgs &args) -> Value {
    std::string message = args.positional.empty() ? "" : softStr(args.positional[0]);
    fail("raise_exception: " + message);
  }));
  std::optional<int64_t> fixed = options.fixedTimeSeconds;
  scope.set("strftime_now", function("strftime_now", [fixed](Renderer &, CallArgs &args) {
    Params p("strftime_now", args, {"format"});
    const std::string &format = requireString(p[0], "strftime_now");
    if (fixed)
      return Value::string(strftimeText(format, std::time_t(*fixed), true));
    return Value::string(strftimeText(format, std::time(nullptr), false));
  }));
}

} // namespace llmc::chat
