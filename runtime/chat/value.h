// The values a chat template computes with: Python's (None, bool, int,
// float, str, list, tuple, dict) plus jinja2's Undefined and a few objects
// (namespace, loop, macros, bound methods). Lists and dicts are immutable
// once built, as ImmutableSandboxedEnvironment keeps them; only a namespace
// changes (`{% set ns.x = ... %}`). Copies share their payload.
#pragma once

#include "support/json.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace llmc::chat {

// Thrown inside the chat library only (caught by renderChatTemplate and
// turned into a Status). `offset` is the template byte offset the error is
// reported at; the innermost expression that knows its position sets it.
struct RenderError {
  std::string message;
  size_t offset = SIZE_MAX;
};
[[noreturn]] void fail(std::string message);

class Value;
class Object;
class Renderer;

struct ListData {
  std::vector<Value> items;
  bool tuple = false;
};

struct DictData {
  std::vector<std::pair<Value, Value>> entries; // insertion order, unique keys
  const Value *find(const Value &key) const;
  const Value *find(const std::string &key) const;
  void set(Value key, Value value); // replaces an existing key in place
};

class Value {
public:
  enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Object };

  Value() = default; // Undefined
  static Value undefined(std::string hint = {}, bool unsafe = false);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value real(double f);
  static Value string(std::string s);
  static Value list(std::vector<Value> items, bool tuple = false);
  static Value dict(DictData data);
  static Value object(std::shared_ptr<Object> object);
  static Value fromJson(const Json &json);
  static Value fromJson(const nlohmann::ordered_json &json); // keeps key order, as Python does

  Kind kind() const { return kind_; }
  bool isUndefined() const { return kind_ == Kind::Undefined; }
  bool isNone() const { return kind_ == Kind::None; }
  bool isBool() const { return kind_ == Kind::Bool; }
  bool isInt() const { return kind_ == Kind::Int; }
  bool isFloat() const { return kind_ == Kind::Float; }
  bool isNumber() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool isString() const { return kind_ == Kind::String; }
  bool isList() const { return kind_ == Kind::List; }
  bool isTuple() const { return kind_ == Kind::List && listData().tuple; }
  bool isDict() const { return kind_ == Kind::Dict; }
  bool isObject() const { return kind_ == Kind::Object; }

  bool asBool() const { return scalar_.b; }
  int64_t asInt() const { return kind_ == Kind::Bool ? int64_t(scalar_.b) : scalar_.i; }
  double asFloat() const;
  const std::string &str() const; // String payload, or an Undefined's hint
  const std::vector<Value> &items() const { return listData().items; }
  const ListData &listData() const { return *static_cast<const ListData *>(payload_.get()); }
  const DictData &dict() const { return *static_cast<const DictData *>(payload_.get()); }
  Object *object() const { return static_cast<Object *>(const_cast<void *>(payload_.get())); }
  std::shared_ptr<Object> objectPtr() const;
  bool isUnsafeUndefined() const { return kind_ == Kind::Undefined && scalar_.b; }

private:
  Kind kind_ = Kind::Undefined;
  union {
    bool b;
    int64_t i;
    double f;
  } scalar_{};
  std::shared_ptr<const void> payload_;
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Objects with behaviour: namespaces, loop contexts, macros, functions.
class Object {
public:
  virtual ~Object() = default;
  virtual std::string typeName() const = 0; // as Python names the type in messages
  virtual std::string repr() const = 0;
  virtual Value getAttr(const std::string &name) const;
  virtual bool callable() const { return false; }
  virtual Value call(Renderer &renderer, CallArgs &args);
};

// `namespace(...)`: the one mutable object, for values set inside loops.
class Namespace : public Object {
public:
  DictData attributes;
  std::string typeName() const override { return "Namespace"; }
  std::string repr() const override;
  Value getAttr(const std::string &name) const override;
};

// Python semantics.
bool truthy(const Value &v);
std::string typeName(const Value &v); // "str", "int", "dict", "NoneType", "Undefined", ...
std::string toStr(const Value &v);    // str(v); Undefined is ""
std::string repr(const Value &v);     // repr(v)
std::string pyFloatRepr(double d);
std::string pyStringRepr(const std::string &s);
bool equals(const Value &a, const Value &b);
int compare(const Value &a, const Value &b); // <0, 0, >0; fails as Python's TypeError does
// json.dumps(v, ensure_ascii=False, indent=..., separators=..., sort_keys=...).
// `indent` empty with hasIndent=false means None.
struct JsonDumpOptions {
  bool hasIndent = false;
  std::string indent;
  std::string itemSeparator = ", ";
  std::string keySeparator = ": ";
  bool sortKeys = false;
};
std::string toJsonText(const Value &v, const JsonDumpOptions &options);

// UTF-8 helpers: strings index and count by code point, as Python's do.
std::u32string decodeUtf8(const std::string &s);
std::string encodeUtf8(const std::u32string &s);
void appendUtf8(std::string &out, char32_t c);
size_t codepointCount(const std::string &s);
bool isPyWhitespace(char32_t c);

} // namespace llmc::chat
