// Field access for the tokenizer.json importer. Every error names the file
// and the dotted path of the field, e.g.
//   "tokenizer.json: field 'pre_tokenizer.pretokenizers[1].type': unsupported
//    pre-tokenizer type 'Digits' (supported: ByteLevel, Split, Metaspace, Sequence)"
#pragma once

#include "support/json.h"
#include "support/status.h"

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

namespace llmc::tok {

// Where a JSON value sits: the file and the path inside it ("model.merges[3]").
struct JsonPath {
  const std::string *source;
  std::string path;

  JsonPath child(const std::string &key) const {
    return {source, path.empty() ? key : path + "." + key};
  }
  JsonPath at(size_t index) const { return {source, path + "[" + std::to_string(index) + "]"}; }
  Status error(const std::string &what) const {
    return Status::error(*source + ": field '" + path + "': " + what);
  }
  Status wrongType(const char *expected, const Json &got) const {
    return error(std::string("expected ") + expected + ", got " + jsonTypeName(got));
  }
};

// Rejects keys that are not in `known`: a field this importer does not know
// could change the tokenization, so it is never ignored silently.
inline Status checkKeys(const Json &object, const JsonPath &at,
                        std::initializer_list<const char *> known) {
  if (!object.is_object())
    return at.wrongType("an object", object);
  for (auto it = object.begin(); it != object.end(); ++it) {
    bool found = false;
    for (const char *key : known)
      found = found || it.key() == key;
    if (!found)
      return at.child(it.key()).error("unknown field (not supported by llmc's importer)");
  }
  return Status::ok();
}

// The member `key`, or nullptr when absent or null.
inline const Json *member(const Json &object, const char *key) {
  auto it = object.find(key);
  return it == object.end() || it->is_null() ? nullptr : &*it;
}

inline Expected<std::string> getString(const Json &object, const char *key, const JsonPath &at) {
  const Json *v = member(object, key);
  if (v == nullptr)
    return at.child(key).error("missing (expected a string)");
  if (!v->is_string())
    return at.child(key).wrongType("a string", *v);
  return v->get<std::string>();
}

inline Expected<std::optional<std::string>> getOptionalString(const Json &object, const char *key,
                                                              const JsonPath &at) {
  const Json *v = member(object, key);
  if (v == nullptr)
    return std::optional<std::string>();
  if (!v->is_string())
    return at.child(key).wrongType("a string", *v);
  return std::optional<std::string>(v->get<std::string>());
}

inline Expected<bool> getBool(const Json &object, const char *key, bool fallback,
                              const JsonPath &at) {
  const Json *v = member(object, key);
  if (v == nullptr)
    return fallback;
  if (!v->is_boolean())
    return at.child(key).wrongType("a boolean", *v);
  return v->get<bool>();
}

// An integer in [lo, hi]; absent gives `fallback` unless it is nullopt.
inline Expected<int64_t> getInt(const Json &object, const char *key,
                                std::optional<int64_t> fallback, int64_t lo, int64_t hi,
                                const JsonPath &at) {
  const Json *v = member(object, key);
  if (v == nullptr) {
    if (fallback)
      return *fallback;
    return at.child(key).error("missing (expected an integer)");
  }
  if (!v->is_number_integer())
    return at.child(key).wrongType("an integer", *v);
  // nlohmann stores non-negative integers as unsigned: compare before converting.
  bool unsignedTooBig = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi);
  if (unsignedTooBig || v->get<int64_t>() < lo || v->get<int64_t>() > hi)
    return at.child(key).error("value " + v->dump() + " is out of range [" + std::to_string(lo) +
                               ", " + std::to_string(hi) + "]");
  return v->get<int64_t>();
}

// A member that must be an array (absent is an error).
inline Expected<const Json *> getArray(const Json &object, const char *key, const JsonPath &at) {
  const Json *v = member(object, key);
  if (v == nullptr)
    return at.child(key).error("missing (expected an array)");
  if (!v->is_array())
    return at.child(key).wrongType("an array", *v);
  return v;
}

} // namespace llmc::tok
