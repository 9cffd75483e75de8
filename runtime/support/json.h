// JSON input for every parser of outside files (config.json, model.json,
// tokenizer.json, safetensors headers). Built on nlohmann::json; exceptions
// stay inside this file's functions.
#pragma once

#include "support/status.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace llmc {

using Json = nlohmann::json;

struct JsonParseOptions {
  // Objects with the same key twice are rejected (safetensors requires it;
  // elsewhere a duplicate is almost always a mistake worth naming).
  bool rejectDuplicateKeys = true;
  // Nesting deeper than this is rejected before it can exhaust the stack.
  int maxDepth = 128;
};

// Parses `text` (which must be valid UTF-8 JSON). `source` names the input in
// errors, e.g. "config.json" or "model.safetensors header".
Expected<Json> parseJson(std::string_view text, const std::string &source,
                         JsonParseOptions options = {});

// "object", "array", "string", "integer", "number", "boolean", "null".
const char *jsonTypeName(const Json &value);

// Typed field access. `where` names the file and enclosing object for errors,
// e.g. "config.json" -> "config.json: field 'hidden_size': expected an integer, got string".
const Json *findField(const Json &object, const char *key);
Expected<int64_t> requireInt(const Json &object, const char *key, const std::string &where);
Expected<double> requireNumber(const Json &object, const char *key, const std::string &where);
Expected<std::string> requireString(const Json &object, const char *key,
                                    const std::string &where);
Expected<bool> requireBool(const Json &object, const char *key, const std::string &where);

// Optional variants: absent or null gives `fallback`; a present value of the wrong type is an error.
Expected<int64_t> optionalInt(const Json &object, const char *key, int64_t fallback,
                              const std::string &where);
Expected<double> optionalNumber(const Json &object, const char *key, double fallback,
                                const std::string &where);
Expected<std::string> optionalString(const Json &object, const char *key,
                                     const std::string &fallback, const std::string &where);
Expected<bool> optionalBool(const Json &object, const char *key, bool fallback,
                            const std::string &where);

} // namespace llmc
