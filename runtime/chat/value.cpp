// Python semantics of template values: str(), repr(), ==, <, truthiness and
// json.dumps, each as CPython 3 prints it (a float's shortest round-trip
// digits, repr's choice of quotes and escapes).
#include "chat/value.h"

#include <utf8proc.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace llmc::chat {

void fail(std::string message) { throw RenderError{std::move(message)}; }

// ---- construction ----------------------------------------------------------

Value Value::undefined(std::string hint, bool unsafe) {
  Value v;
  v.scalar_.b = unsafe;
  if (!hint.empty())
    v.payload_ = std::make_shared<const std::string>(std::move(hint));
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.scalar_.b = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.scalar_.i = i;
  return v;
}
Value Value::real(double f) {
  Value v;
  v.kind_ = Kind::Float;
  v.scalar_.f = f;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::String;
  v.payload_ = std::make_shared<const std::string>(std::move(s));
  return v;
}
Value Value::list(std::vector<Value> items, bool tuple) {
  Value v;
  v.kind_ = Kind::List;
  v.payload_ = std::make_shared<const ListData>(ListData{std::move(items), tuple});
  return v;
}
Value Value::dict(DictData data) {
  Value v;
  v.kind_ = Kind::Dict;
  v.payload_ = std::make_shared<const DictData>(std::move(data));
  return v;
}
Value Value::object(std::shared_ptr<Object> object) {
  Value v;
  v.kind_ = Kind::Object;
  v.payload_ = std::move(object);
  return v;
}

std::shared_ptr<Object> Value::objectPtr() const {
  return std::const_pointer_cast<Object>(std::static_pointer_cast<const Object>(payload_));
}

double Value::asFloat() const {
  switch (kind_) {
  case Kind::Float:
    return scalar_.f;
  case Kind::Int:
    return double(scalar_.i);
  case Kind::Bool:
    return scalar_.b ? 1.0 : 0.0;
  default:
    return 0.0;
  }
}

const std::string &Value::str() const {
  static const std::string empty;
  if ((kind_ == Kind::String || kind_ == Kind::Undefined) && payload_)
    return *static_cast<const std::string *>(payload_.get());
  return empty;
}

const Value *DictData::find(const Value &key) const {
  for (const auto &entry : entries)
    if (equals(entry.first, key))
      return &entry.second;
  return nullptr;
}

const Value *DictData::find(const std::string &key) const {
  for (const auto &entry : entries)
    if (entry.first.isString() && entry.first.str() == key)
      return &entry.second;
  return nullptr;
}

void DictData::set(Value key, Value value) {
  for (auto &entry : entries)
    if (equals(entry.first, key)) {
      entry.second = std::move(value);
      return;
    }
  entries.emplace_back(std::move(key), std::move(value));
}

Value Object::getAttr(const std::string &name) const {
  return Value::undefined("'" + typeName() + " object' has no attribute '" + name + "'");
}

Value Object::call(Renderer &, CallArgs &) { fail("'" + typeName() + "' object is not callable"); }

std::string Namespace::repr() const { return "<Namespace " + chat::repr(Value::dict(attributes)) + ">"; }

Value Namespace::getAttr(const std::string &name) const {
  if (const Value *v = attributes.find(name))
    return *v;
  return Value::undefined("'Namespace object' has no attribute '" + name + "'");
}

// ---- UTF-8 -----------------------------------------------------------------

std::u32string decodeUtf8(const std::string &s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    utf8proc_int32_t c = 0;
    utf8proc_ssize_t n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t *>(s.data() + i),
                                          utf8proc_ssize_t(s.size() - i), &c);
    if (n <= 0) { // invalid byte: keep it as U+FFFD, one byte at a time
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(char32_t(c));
    i += size_t(n);
  }
  return out;
}

void appendUtf8(std::string &out, char32_t c) {
  utf8proc_uint8_t buffer[4];
  utf8proc_ssize_t n = utf8proc_encode_char(utf8proc_int32_t(c), buffer);
  out.append(reinterpret_cast<const char *>(buffer), size_t(n));
}

std::string encodeUtf8(const std::u32string &s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s)
    appendUtf8(out, c);
  return out;
}

size_t codepointCount(const std::string &s) {
  size_t n = 0;
  for (unsigned char c : s)
    n += (c & 0xC0) != 0x80;
  return n;
}

bool isPyWhitespace(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F) || c == 0x85 ||
         c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

// ---- str / repr ------------------------------------------------------------

std::string pyFloatRepr(double d) {
  if (std::isnan(d))
    return "nan";
  if (std::isinf(d))
    return d < 0 ? "-inf" : "inf";
  char buffer[64];
  // The shortest digit string that reads back as the same double.
  int precision = 1;
  for (; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof buffer, "%.*e", precision - 1, d);
    if (std::strtod(buffer, nullptr) == d)
      break;
  }
  std::string text = buffer; // [-]d.ddde[+-]XX
  bool negative = text[0] == '-';
  if (negative)
    text.erase(0, 1);
  size_t e = text.find('e');
  int exponent = std::atoi(text.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (text[i] != '.')
      digits += text[i];
  while (digits.size() > 1 && digits.back() == '0')
    digits.pop_back();
  std::string out = negative ? "-" : "";
  int n = int(digits.size());
  if (exponent >= -4 && exponent < 16) {
    if (exponent >= 0) {
      if (n <= exponent + 1)
        out += digits + std::string(size_t(exponent + 1 - n), '0') + ".0";
      else
        out += digits.substr(0, size_t(exponent + 1)) + "." + digits.substr(size_t(exponent + 1));
    } else {
      out += "0." + std::string(size_t(-exponent - 1), '0') + digits;
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (n > 1)
    out += "." + digits.substr(1);
  char exp[16];
  std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp;
}

namespace {

bool isPrintable(char32_t c) {
  if (c < 0x20 || c == 0x7F)
    return false;
  if (c < 0x7F)
    return true;
  switch (utf8proc_category(utf8proc_int32_t(c))) {
  case UTF8PROC_CATEGORY_CC:
  case UTF8PROC_CATEGORY_CF:
  case UTF8PROC_CATEGORY_CS:
  case UTF8PROC_CATEGORY_CO:
  case UTF8PROC_CATEGORY_CN:
  case UTF8PROC_CATEGORY_ZL:
  case UTF8PROC_CATEGORY_ZP:
  case UTF8PROC_CATEGORY_ZS:
    return false;
  default:
    return true;
  }
}

void reprInto(std::string &out, const Value &v, int depth);

void reprSequence(std::string &out, const std::vector<Value> &items, const char *open,
                  const char *close, int depth) {
  out += open;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i)
      out += ", ";
    reprInto(out, items[i], depth + 1);
  }
  out += close;
}

void reprInto(std::string &out, const Value &v, int depth) {
  if (depth > 200)
    fail("a value nested deeper than 200 levels cannot be printed");
  switch (v.kind()) {
  case Value::Kind::Undefined:
    out += "Undefined";
    return;
  case Value::Kind::String:
    out += pyStringRepr(v.str());
    return;
  case Value::Kind::List:
    if (v.isTuple()) {
      reprSequence(out, v.items(), "(", v.items().size() == 1 ? ",)" : ")", depth);
      return;
    }
    reprSequence(out, v.items(), "[", "]", depth);
    return;
  case Value::Kind::Dict: {
    out += "{";
    bool first = true;
    for (const auto &[key, value] : v.dict().entries) {
      if (!first)
        out += ", ";
      first = false;
      reprInto(out, key, depth + 1);
      out += ": ";
      reprInto(out, value, depth + 1);
    }
    out += "}";
    return;
  }
  case Value::Kind::Object:
    out += v.object()->repr();
    return;
  case Value::Kind::None:
  case Value::Kind::Bool:
  case Value::Kind::Int:
  case Value::Kind::Float:
    out += toStr(v);
    return;
  }
}

} // namespace

std::string pyStringRepr(const std::string &s) {
  bool hasSingle = s.find('\'') != std::string::npos;
  bool hasDouble = s.find('"') != std::string::npos;
  char quote = hasSingle && !hasDouble ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : decodeUtf8(s)) {
    if (c == char32_t(quote) || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (!isPrintable(c)) {
      char buffer[16];
      if (c < 0x100)
        std::snprintf(buffer, sizeof buffer, "\\x%02x", unsigned(c));
      else if (c < 0x10000)
        std::snprintf(buffer, sizeof buffer, "\\u%04x", unsigned(c));
      else
        std::snprintf(buffer, sizeof buffer, "\\U%08x", unsigned(c));
      out += buffer;
    } else {
      appendUtf8(out, c);
    }
  }
  out += quote;
  return out;
}

std::string repr(const Value &v) {
  std::string out;
  reprInto(out, v, 0);
  return out;
}

std::string toStr(const Value &v) {
  switch (v.kind()) {
  case Value::Kind::Undefined:
    return "";
  case Value::Kind::None:
    return "None";
  case Value::Kind::Bool:
    return v.asBool() ? "True" : "False";
  case Value::Kind::Int:
    return std::to_string(v.asInt());
  case Value::Kind::Float:
    return pyFloatRepr(v.asFloat());
  case Value::Kind::String:
    return v.str();
  case Value::Kind::List:
  case Value::Kind::Dict:
  case Value::Kind::Object:
    return repr(v);
  }
  return "";
}

std::string typeName(const Value &v) {
  switch (v.kind()) {
  case Value::Kind::Undefined:
    return "Undefined";
  case Value::Kind::None:
    return "NoneType";
  case Value::Kind::Bool:
    return "bool";
  case Value::Kind::Int:
    return "int";
  case Value::Kind::Float:
    return "float";
  case Value::Kind::String:
    return "str";
  case Value::Kind::List:
    return v.isTuple() ? "tuple" : "list";
  case Value::Kind::Dict:
    return "dict";
  case Value::Kind::Object:
    return v.object()->typeName();
  }
  return "object";
}

bool truthy(const Value &v) {
  switch (v.kind()) {
  case Value::Kind::Undefined:
  case Value::Kind::None:
    return false;
  case Value::Kind::Bool:
    return v.asBool();
  case Value::Kind::Int:
    return v.asInt() != 0;
  case Value::Kind::Float:
    return v.asFloat() != 0.0;
  case Value::Kind::String:
    return !v.str().empty();
  case Value::Kind::List:
    return !v.items().empty();
  case Value::Kind::Dict:
    return !v.dict().entries.empty();
  case Value::Kind::Object:
    return true;
  }
  return false;
}

// ---- comparison ------------------------------------------------------------

bool equals(const Value &a, const Value &b) {
  if (a.isNumber() && b.isNumber()) {
    if (a.isFloat() || b.isFloat())
      return a.asFloat() == b.asFloat();
    return a.asInt() == b.asInt();
  }
  if (a.kind() != b.kind())
    return false;
  switch (a.kind()) {
  case Value::Kind::Undefined:
  case Value::Kind::None:
    return true;
  case Value::Kind::String:
    return a.str() == b.str();
  case Value::Kind::List: {
    if (a.isTuple() != b.isTuple() || a.items().size() != b.items().size())
      return false;
    for (size_t i = 0; i < a.items().size(); ++i)
      if (!equals(a.items()[i], b.items()[i]))
        return false;
    return true;
  }
  case Value::Kind::Dict: {
    const auto &x = a.dict().entries;
    if (x.size() != b.dict().entries.size())
      return false;
    for (const auto &[key, value] : x) {
      const Value *other = b.dict().find(key);
      if (!other || !equals(value, *other))
        return false;
    }
    return true;
  }
  case Value::Kind::Object:
    return a.object() == b.object();
  case Value::Kind::Bool:
  case Value::Kind::Int:
  case Value::Kind::Float:
    return false; // handled above
  }
  return false;
}

int compare(const Value &a, const Value &b) {
  if (a.isNumber() && b.isNumber()) {
    if (a.isFloat() || b.isFloat()) {
      double x = a.asFloat(), y = b.asFloat();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    int64_t x = a.asInt(), y = b.asInt();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.isString() && b.isString())
    return a.str().compare(b.str()) < 0 ? -1 : (a.str() == b.str() ? 0 : 1);
  if (a.isList() && b.isList() && a.isTuple() == b.isTuple()) {
    const auto &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equals(x[i], y[i]))
        return compare(x[i], y[i]);
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  fail("'<' not supported between instances of '" + typeName(a) + "' and '" + typeName(b) + "'");
}

// ---- json.dumps --------------------------------------------------------------

namespace {

void jsonString(std::string &out, const std::string &s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    default:
      if (c < 0x20) {
        char buffer[8];
        std::snprintf(buffer, sizeof buffer, "\\u%04x", unsigned(c));
        out += buffer;
      } else {
        out += char(c);
      }
    }
  }
  out += '"';
}

std::string jsonFloat(double d) {
  if (std::isnan(d))
    return "NaN";
  if (std::isinf(d))
    return d < 0 ? "-Infinity" : "Infinity";
  return pyFloatRepr(d);
}

std::string jsonKey(const Value &key) {
  switch (key.kind()) {
  case Value::Kind::String:
    return key.str();
  case Value::Kind::Int:
    return std::to_string(key.asInt());
  case Value::Kind::Float:
    return jsonFloat(key.asFloat());
  case Value::Kind::Bool:
    return key.asBool() ? "true" : "false";
  case Value::Kind::None:
    return "null";
  default:
    fail("keys must be str, int, float, bool or None, not " + typeName(key));
  }
}

void jsonNewline(std::string &out, const JsonDumpOptions &o, int level) {
  out += '\n';
  for (int i = 0; i < level; ++i)
    out += o.indent;
}

void jsonInto(std::string &out, const Value &v, const JsonDumpOptions &o, int level) {
  if (level > 200)
    fail("tojson: a value nested deeper than 200 levels (or one that contains itself)");
  switch (v.kind()) {
  case Value::Kind::None:
    out += "null";
    return;
  case Value::Kind::Bool:
    out += v.asBool() ? "true" : "false";
    return;
  case Value::Kind::Int:
    out += std::to_string(v.asInt());
    return;
  case Value::Kind::Float:
    out += jsonFloat(v.asFloat());
    return;
  case Value::Kind::String:
    jsonString(out, v.str());
    return;
  case Value::Kind::List: {
    const auto &items = v.items();
    if (items.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i)
        out += o.itemSeparator;
      if (o.hasIndent)
        jsonNewline(out, o, level + 1);
      jsonInto(out, items[i], o, level + 1);
    }
    if (o.hasIndent)
      jsonNewline(out, o, level);
    out += ']';
    return;
  }
  case Value::Kind::Dict: {
    std::vector<const std::pair<Value, Value> *> entries;
    for (const auto &entry : v.dict().entries)
      entries.push_back(&entry);
    if (entries.empty()) {
      out += "{}";
      return;
    }
    if (o.sortKeys)
      std::stable_sort(entries.begin(), entries.end(),
                       [](auto *x, auto *y) { return compare(x->first, y->first) < 0; });
    out += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i)
        out += o.itemSeparator;
      if (o.hasIndent)
        jsonNewline(out, o, level + 1);
      jsonString(out, jsonKey(entries[i]->first));
      out += o.keySeparator;
      jsonInto(out, entries[i]->second, o, level + 1);
    }
    if (o.hasIndent)
      jsonNewline(out, o, level);
    out += '}';
    return;
  }
  case Value::Kind::Undefined:
  case Value::Kind::Object:
    fail("Object of type " + typeName(v) + " is not JSON serializable");
  }
}

template <typename JsonType> Value valueFromJson(const JsonType &json, int depth) {
  if (depth > 256)
    fail("a JSON value nested deeper than 256 levels");
  switch (json.type()) {
  case nlohmann::json::value_t::null:
  case nlohmann::json::value_t::discarded:
    return Value::none();
  case nlohmann::json::value_t::boolean:
    return Value::boolean(json.template get<bool>());
  case nlohmann::json::value_t::number_integer:
    return Value::integer(json.template get<int64_t>());
  case nlohmann::json::value_t::number_unsigned: {
    uint64_t u = json.template get<uint64_t>();
    if (u > uint64_t(INT64_MAX))
      return Value::real(double(u));
    return Value::integer(int64_t(u));
  }
  case nlohmann::json::value_t::number_float:
    return Value::real(json.template get<double>());
  case nlohmann::json::value_t::string:
    return Value::string(json.template get_ref<const std::string &>());
  case nlohmann::json::value_t::array: {
    std::vector<Value> items;
    items.reserve(json.size());
    for (const auto &item : json)
      items.push_back(valueFromJson(item, depth + 1));
    return Value::list(std::move(items));
  }
  case nlohmann::json::value_t::object: {
    DictData dict;
    dict.entries.reserve(json.size());
    for (auto it = json.begin(); it != json.end(); ++it)
      dict.entries.emplace_back(Value::string(it.key()), valueFromJson(it.value(), depth + 1));
    return Value::dict(std::move(dict));
  }
  case nlohmann::json::value_t::binary:
    fail("binary JSON values are not supported");
  }
  return Value::none();
}

} // namespace

std::string toJsonText(const Value &v, const JsonDumpOptions &options) {
  std::string out;
  jsonInto(out, v, options, 0);
  return out;
}

Value Value::fromJson(const Json &json) { return valueFromJson(json, 0); }
Value Value::fromJson(const nlohmann::ordered_json &json) { return valueFromJson(json, 0); }

} // namespace llmc::chat
