// What the C API's translation units share: the handle types and the
// helpers that turn Status errors and exceptions into llmc_status plus the
// thread's message (runtime/capi/llmc_c_api.cpp has the entry points of
// engines, tokenizer, sampler and generate; capi_chat.cpp, capi_step.cpp and
// capi_scheduler.cpp the rest).
#pragma once

#include "llmc/llmc.h"

#include "engine/engine.h"
#include "sampling/sampler.h"
#include "support/status.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>

struct llmc_engine {
  std::unique_ptr<llmc::Engine> engine;
  std::string backend;       // description() kept for model_info
  int64_t schedulers = 0;    // live llmc_scheduler objects over this engine
};

struct llmc_sampler {
  explicit llmc_sampler(llmc::sampling::Sampler s) : sampler(std::move(s)) {}
  llmc::sampling::Sampler sampler;
};

namespace llmc::capi {

// Sets the thread's last error and returns `status`.
llmc_status fail(llmc_status status, std::string message);

inline llmc_status fromStatus(const Status &status, llmc_status code = LLMC_STATUS_FAILED) {
  if (status)
    return LLMC_STATUS_OK;
  return fail(code, status.message());
}

// Runs `body` (returning llmc_status) with every exception turned into an error.
template <typename Body> llmc_status guarded(const char *function, Body &&body) {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return fail(LLMC_STATUS_FAILED, std::string(function) + ": out of memory");
  } catch (const std::exception &e) {
    return fail(LLMC_STATUS_FAILED, std::string(function) + ": " + e.what());
  } catch (...) {
    return fail(LLMC_STATUS_FAILED, std::string(function) + ": unknown error");
  }
}

inline llmc_status nullArgument(const char *function, const char *argument) {
  return fail(LLMC_STATUS_INVALID_ARGUMENT,
              std::string(function) + ": `" + argument + "` must not be NULL");
}

// The part of an options struct the caller's header knew about: fields past
// its struct_size keep their defaults.
template <typename T> T withDefaults(const T *given, void (*init)(T *)) {
  T options;
  init(&options);
  if (given != nullptr) {
    size_t n = std::min<size_t>(given->struct_size, sizeof(T));
    std::memcpy(static_cast<void *>(&options), given, n);
    options.struct_size = sizeof(T);
  }
  return options;
}

inline llmc_status checkStructSize(const char *function, uint32_t structSize, size_t minimum) {
  if (structSize < minimum)
    return fail(LLMC_STATUS_INVALID_ARGUMENT,
                std::string(function) + ": struct_size " + std::to_string(structSize) +
                    " is too small: fill the struct with its *_init function first");
  return LLMC_STATUS_OK;
}

// Copies `text` into the caller's buffer of `capacity` bytes with its NUL,
// or fails with BUFFER_TOO_SMALL; *length gets text.size() either way.
llmc_status copyText(const char *function, const std::string &text, char *out, size_t capacity,
                     size_t *length);

// LLMC_STATUS_BUSY when a scheduler drives the engine (its sequences must
// not be touched by hand), else OK.
inline llmc_status refuseWhenScheduled(const char *function, const llmc_engine &engine) {
  if (engine.schedulers > 0)
    return fail(LLMC_STATUS_BUSY, std::string(function) +
                                      ": a scheduler drives this engine; destroy it first "
                                      "(llmc_scheduler_destroy)");
  return LLMC_STATUS_OK;
}

llmc::sampling::SamplingParams toSamplingParams(const llmc_sampling_params &p);

// The checks llmc_sampler_sample and llmc_sampler_sample_row share: the
// sampler, output token and (when numSeen > 0) seen ids are set, and the
// vocabulary size fits an int32. LLMC_STATUS_OK when all hold.
llmc_status checkSampleArguments(const char *fn, const llmc_sampler *sampler,
                                 const int32_t *token, const int32_t *seen, size_t numSeen,
                                 size_t vocabSize);

// A failed engine step: KV_CACHE_FULL when the pool had no room, else FAILED.
llmc_status stepFailure(const Status &status);

} // namespace llmc::capi
