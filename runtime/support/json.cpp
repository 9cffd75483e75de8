#include "support/json.h"

#include <set>
#include <vector>

namespace llmc {
namespace {

// Thrown from the DOM builder below to stop parsing at the first structural
// problem; caught in parseJson.
struct JsonStructureError {
  std::string message;
};

// Builds the DOM with nlohmann's plain SAX DOM builder and checks depth and
// duplicate keys on the way. (nlohmann's callback parser, used before, scans
// the enclosing array at every object end: quadratic on arrays of objects,
// 20+ s for a tokenizer.json with 40k added tokens.)
class CheckingDomBuilder {
public:
  CheckingDomBuilder(Json &result, JsonParseOptions options) : dom_(result), options_(options) {}

  bool null() { return dom_.null(); }
  bool boolean(bool value) { return dom_.boolean(value); }
  bool number_integer(Json::number_integer_t value) { return dom_.number_integer(value); }
  bool number_unsigned(Json::number_unsigned_t value) { return dom_.number_unsigned(value); }
  bool number_float(Json::number_float_t value, const std::string &text) {
    return dom_.number_float(value, text);
  }
  bool string(std::string &value) { return dom_.string(value); }
  bool binary(Json::binary_t &value) { return dom_.binary(value); }
  bool start_object(std::size_t size) {
    enter();
    keysPerObject_.emplace_back();
    return dom_.start_object(size);
  }
  bool key(std::string &key) {
    if (options_.rejectDuplicateKeys && !keysPerObject_.back().insert(key).second)
      throw JsonStructureError{"duplicate key '" + key + "'"};
    return dom_.key(key);
  }
  bool end_object() {
    keysPerObject_.pop_back();
    --depth_;
    return dom_.end_object();
  }
  bool start_array(std::size_t size) {
    enter();
    return dom_.start_array(size);
  }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  template <typename Exception>
  bool parse_error(std::size_t position, const std::string &token, const Exception &error) {
    return dom_.parse_error(position, token, error); // throws `error`
  }

private:
  void enter() {
    if (++depth_ > options_.maxDepth)
      throw JsonStructureError{"nesting deeper than " + std::to_string(options_.maxDepth)};
  }

  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  JsonParseOptions options_;
  int depth_ = 0;
  std::vector<std::set<std::string>> keysPerObject_;
};

} // namespace

Expected<Json> parseJson(std::string_view text, const std::string &source,
                         JsonParseOptions options) {
  try {
    Json result;
    CheckingDomBuilder builder(result, options);
    Json::sax_parse(text.begin(), text.end(), &builder);
    return result;
  } catch (const JsonStructureError &e) {
    return Status::error(source + ": invalid JSON: " + e.message);
  } catch (const Json::exception &e) {
    return Status::error(source + ": invalid JSON: " + e.what());
  } catch (const std::exception &e) {
    return Status::error(source + ": cannot parse JSON: " + e.what());
  }
}

const char *jsonTypeName(const Json &value) {
  switch (value.type()) {
  case Json::value_t::object:
    return "object";
  case Json::value_t::array:
    return "array";
  case Json::value_t::string:
    return "string";
  case Json::value_t::number_integer:
  case Json::value_t::number_unsigned:
    return "integer";
  case Json::value_t::number_float:
    return "number";
  case Json::value_t::boolean:
    return "boolean";
  case Json::value_t::null:
    return "null";
  case Json::value_t::binary:
    return "binary";
  case Json::value_t::discarded:
    return "discarded";
  }
  return "unknown";
}

const Json *findField(const Json &object, const char *key) {
  if (!object.is_object())
    return nullptr;
  auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

namespace {

Status wrongType(const std::string &where, const char *key, const char *expected,
                 const Json &got) {
  return Status::error(where + ": field '" + key + "': expected " + expected + ", got " +
                       jsonTypeName(got));
}

Status missing(const std::string &where, const char *key, const char *expected) {
  return Status::error(where + ": missing required field '" + key + "' (" + expected + ")");
}

Expected<int64_t> toInt(const Json &v, const char *key, const std::string &where) {
  if (v.is_number_integer() || v.is_number_unsigned()) {
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
      return Status::error(where + ": field '" + key + "': integer out of range");
    return v.get<int64_t>();
  }
  // 4096.0 is accepted as an integer; 4096.5 is not.
  if (v.is_number_float()) {
    double d = v.get<double>();
    // Range first: casting an out-of-range double to int64 is undefined.
    if (d > -9.0e18 && d < 9.0e18 && d == static_cast<double>(static_cast<int64_t>(d)))
      return static_cast<int64_t>(d);
  }
  return wrongType(where, key, "an integer", v);
}

} // namespace

Expected<int64_t> requireInt(const Json &object, const char *key, const std::string &where) {
  const Json *v = findField(object, key);
  if (v == nullptr || v->is_null())
    return missing(where, key, "an integer");
  return toInt(*v, key, where);
}

Expected<double> requireNumber(const Json &object, const char *key, const std::string &where) {
  const Json *v = findField(object, key);
  if (v == nullptr || v->is_null())
    return missing(where, key, "a number");
  if (!v->is_number())
    return wrongType(where, key, "a number", *v);
  return v->get<double>();
}

Expected<std::string> requireString(const Json &object, const char *key,
                                    const std::string &where) {
  const Json *v = findField(object, key);
  if (v == nullptr || v->is_null())
    return missing(where, key, "a string");
  if (!v->is_string())
    return wrongType(where, key, "a string", *v);
  return v->get<std::string>();
}

Expected<bool> requireBool(const Json &object, const char *key, const std::string &where) {
  const Json *v = findField(object, key);
  if (v == nullptr || v->is_null())
    return missing(where, key, "a boolean");
  if (!v->is_boolean())
    return wrongType(where, key, "a boolean", *v);
  return v->get<bool>();
}

Expected<int64_t> optionalInt(const Json &object, const char *key, int64_t fallback,
                              const std::string &where) {
  const Json *v = findField(object, key);
  if (v == nullptr || v->is_null())
    return fallback;
  return toInt(*v, key, where);
}

Expected<double> optionalNumber(const Json &object, const char *key, double fallback,
                                const std::string &where) {
  const Json *v = findField(object, key);
  if (v == nullptr || v->is_null())
    return fallback;
  if (!v->is_number())
    return wrongType(where, key, "a number", *v);
  return v->get<double>();
}

Expected<std::string> optionalString(const Json &object, const char *key,
                                     const std::string &fallback, const std::string &where) {
  const Json *v = findField(object, key);
  if (v == nullptr || v->is_null())
    return fallback;
  if (!v->is_string())
    return wrongType(where, key, "a string", *v);
  return v->get<std::string>();
}

Expected<bool> optionalBool(const Json &object, const char *key, bool fallback,
                            const std::string &where) {
  const Json *v = findField(object, key);
  if (v == nullptr || v->is_null())
    return fallback;
  if (!v->is_boolean())
    return wrongType(where, key, "a boolean", *v);
  return v->get<bool>();
}

} // namespace llmc
