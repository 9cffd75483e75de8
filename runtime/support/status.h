// Error handling for every llmc library: no exceptions cross a library
// boundary and nothing calls exit(). A fallible function returns a Status
// (success or an error message) or an Expected<T> (a value or an error).
//
// Messages name the file, the field or tensor, and what was expected:
//   "model.safetensors: tensor 'lm_head.weight': shape [512, 64] x F32 needs
//    131072 bytes but data_offsets span 1024"
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace llmc {

class [[nodiscard]] Status {
public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.message_ = std::move(message);
    s.failed_ = true;
    return s;
  }

  bool isOk() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string &message() const { return message_; }

  // Returns the same error with `context` in front ("file.json: " + message).
  Status withContext(const std::string &context) const {
    if (!failed_)
      return *this;
    return error(context + ": " + message_);
  }

private:
  std::string message_;
  bool failed_ = false;
};

template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : value_(std::move(value)) {}
  Expected(Status error) : error_(std::move(error)) {}

  bool isOk() const { return value_.has_value(); }
  explicit operator bool() const { return value_.has_value(); }

  T &value() & { return *value_; }
  const T &value() const & { return *value_; }
  T &&value() && { return std::move(*value_); }
  T &operator*() & { return *value_; }
  const T &operator*() const & { return *value_; }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }

  const Status &status() const { return error_; }
  const std::string &message() const { return error_.message(); }

private:
  std::optional<T> value_;
  Status error_;
};

} // namespace llmc

// Propagates an error Status from an expression that yields a Status.
#define LLMC_RETURN_IF_ERROR(expr)                                                                 \
  do {                                                                                             \
    ::llmc::Status llmc_status_ = (expr);                                                          \
    if (!llmc_status_.isOk())                                                                      \
      return llmc_status_;                                                                         \
  } while (0)

#define LLMC_CONCAT_INNER(a, b) a##b
#define LLMC_CONCAT(a, b) LLMC_CONCAT_INNER(a, b)

// `LLMC_ASSIGN_OR_RETURN(auto x, expectedExpr);` binds the value or returns the error.
#define LLMC_ASSIGN_OR_RETURN(lhs, expr)                                                           \
  LLMC_ASSIGN_OR_RETURN_IMPL(LLMC_CONCAT(llmc_expected_, __LINE__), lhs, expr)
#define LLMC_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr)                                                 \
  auto tmp = (expr);                                                                               \
  if (!tmp.isOk())                                                                                 \
    return tmp.status();                                                                           \
  lhs = std::move(tmp).value()
