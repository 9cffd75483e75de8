// The C API (include/llmc/llmc.h) over the C++ runtime: handles wrap an
// Engine or a Sampler, every entry point checks its pointers, converts
// Status errors to llmc_status plus a thread-local message, and catches
// anything thrown below (std::bad_alloc above all) so that nothing crosses
// the C boundary.
#include "capi_internal.h"

#include "engine/generate.h"

#include <vector>

#ifndef LLMC_VERSION
#define LLMC_VERSION "0.0.0"
#endif

namespace llmc::capi {

namespace {
thread_local std::string lastError;
} // namespace

llmc_status fail(llmc_status status, std::string message) {
  lastError = std::move(message);
  return status;
}

llmc_status copyText(const char *function, const std::string &text, char *out, size_t capacity,
                     size_t *length) {
  *length = text.size();
  if (text.size() + 1 > capacity)
    return fail(LLMC_STATUS_BUFFER_TOO_SMALL,
                std::string(function) + ": the text needs " + std::to_string(text.size() + 1) +
                    " bytes with its NUL, more than the capacity " + std::to_string(capacity));
  std::memcpy(out, text.data(), text.size());
  out[text.size()] = '\0';
  return LLMC_STATUS_OK;
}

llmc_status checkSampleArguments(const char *fn, const llmc_sampler *sampler, const int32_t *token,
                                 const int32_t *seen, size_t numSeen, size_t vocabSize) {
  if (sampler == nullptr)
    return nullArgument(fn, "sampler");
  if (token == nullptr)
    return nullArgument(fn, "token");
  if (seen == nullptr && numSeen > 0)
    return nullArgument(fn, "seen");
  if (vocabSize == 0 || vocabSize > static_cast<size_t>(INT32_MAX))
    return fail(LLMC_STATUS_INVALID_ARGUMENT, std::string(fn) +
                                                  ": vocab_size must be in [1, 2^31 - 1], got " +
                                                  std::to_string(vocabSize));
  return LLMC_STATUS_OK;
}

llmc::sampling::SamplingParams toSamplingParams(const llmc_sampling_params &p) {
  llmc::sampling::SamplingParams params;
  params.temperature = p.temperature;
  params.topK = p.top_k;
  params.topP = p.top_p;
  params.minP = p.min_p;
  params.repetitionPenalty = p.repetition_penalty;
  params.seed = p.seed;
  return params;
}

llmc_status stepFailure(const Status &status) {
  return fromStatus(status, status.message().find("KV cache full") != std::string::npos
                                ? LLMC_STATUS_KV_CACHE_FULL
                                : LLMC_STATUS_FAILED);
}

namespace {
// Copies `text` into a fixed char array, truncated, always NUL-terminated.
template <size_t N> void copyTruncated(char (&out)[N], const std::string &text) {
  size_t n = std::min(text.size(), N - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}
} // namespace

} // namespace llmc::capi

using namespace llmc::capi;

extern "C" {

const char *llmc_status_name(llmc_status status) {
  switch (status) {
  case LLMC_STATUS_OK:
    return "ok";
  case LLMC_STATUS_INVALID_ARGUMENT:
    return "invalid argument";
  case LLMC_STATUS_LOAD_FAILED:
    return "load failed";
  case LLMC_STATUS_BUFFER_TOO_SMALL:
    return "buffer too small";
  case LLMC_STATUS_KV_CACHE_FULL:
    return "KV cache full";
  case LLMC_STATUS_FAILED:
    return "failed";
  case LLMC_STATUS_NOT_FOUND:
    return "not found";
  case LLMC_STATUS_TEMPLATE_ERROR:
    return "template error";
  case LLMC_STATUS_BUSY:
    return "busy";
  }
  return "unknown status";
}

const char *llmc_last_error(void) { return llmc::capi::lastError.c_str(); }

const char *llmc_version(void) { return LLMC_VERSION; }

void llmc_engine_options_init(llmc_engine_options *options) {
  if (options == nullptr)
    return;
  *options = llmc_engine_options{};
  options->struct_size = sizeof(llmc_engine_options);
  options->device = "auto";
  options->threads = 0;
  options->kv_cache_tokens = 0;
  options->max_sequences = 1;
  options->gpu_memory_fraction = 0.9;
  options->verify_weights = 1;
  options->kv_cache_dtype = "auto";
}

llmc_status llmc_engine_open(const char *planPath, const llmc_engine_options *given,
                             llmc_engine **out) {
  const char *fn = "llmc_engine_open";
  return guarded(fn, [&]() -> llmc_status {
    if (planPath == nullptr)
      return nullArgument(fn, "plan_path");
    if (out == nullptr)
      return nullArgument(fn, "engine");
    *out = nullptr;
    if (given != nullptr)
      if (llmc_status s = checkStructSize(fn, given->struct_size, sizeof(uint32_t) * 2); s)
        return s;
    llmc_engine_options o = withDefaults(given, llmc_engine_options_init);
    if (o.threads < 0 || o.kv_cache_tokens < 0 || o.max_sequences < 1 ||
        !(o.gpu_memory_fraction > 0.0 && o.gpu_memory_fraction <= 1.0))
      return fail(LLMC_STATUS_INVALID_ARGUMENT,
                  std::string(fn) + ": options out of range (threads >= 0, kv_cache_tokens >= 0, "
                                    "max_sequences >= 1, gpu_memory_fraction in (0, 1])");
    llmc::EngineOptions options;
    options.device = o.device != nullptr ? o.device : "auto";
    options.threads = o.threads;
    options.kvCacheTokens = o.kv_cache_tokens;
    options.maxSequences = o.max_sequences;
    options.gpuMemoryFraction = o.gpu_memory_fraction;
    options.verifyWeights = o.verify_weights != 0;
    options.kvCacheDtype = o.kv_cache_dtype != nullptr ? o.kv_cache_dtype : "auto";
    auto engine = llmc::Engine::load(planPath, options);
    if (!engine)
      return fromStatus(engine.status(), LLMC_STATUS_LOAD_FAILED);
    auto handle = std::make_unique<llmc_engine>();
    handle->backend = (*engine)->backend().description();
    handle->engine = std::move(*engine);
    *out = handle.release();
    return LLMC_STATUS_OK;
  });
}

void llmc_engine_close(llmc_engine *engine) { delete engine; }

llmc_status llmc_engine_model_info(const llmc_engine *handle, llmc_model_info *info) {
  const char *fn = "llmc_engine_model_info";
  return guarded(fn, [&]() -> llmc_status {
    if (handle == nullptr)
      return nullArgument(fn, "engine");
    if (info == nullptr)
      return nullArgument(fn, "info");
    const llmc::Engine &engine = *handle->engine;
    const llmc::fb::ModelInfo &model = engine.model();
    *info = llmc_model_info{};
    copyTruncated(info->architecture, model.architecture() ? model.architecture()->str() : "");
    copyTruncated(info->backend, handle->backend);
    info->vocab_size = model.vocab_size();
    info->max_seq_len = model.max_seq_len();
    info->num_layers = model.num_layers();
    info->hidden_size = model.hidden_size();
    info->num_heads = model.num_heads();
    info->num_kv_heads = model.num_kv_heads();
    info->head_dim = model.head_dim();
    auto firstOf = [](const flatbuffers::Vector<int64_t> *ids) -> int32_t {
      return ids != nullptr && ids->size() > 0 ? static_cast<int32_t>(ids->Get(0)) : -1;
    };
    info->bos_id = firstOf(model.bos_token_ids());
    info->eos_id = firstOf(model.eos_token_ids());
    info->synthetic = engine.synthetic() ? 1 : 0;
    return LLMC_STATUS_OK;
  });
}

llmc_status llmc_tokenize(const llmc_engine *handle, const char *text, size_t textLength,
                          int addSpecial, int32_t *ids, size_t capacity, size_t *count) {
  const char *fn = "llmc_tokenize";
  return guarded(fn, [&]() -> llmc_status {
    if (handle == nullptr)
      return nullArgument(fn, "engine");
    if (text == nullptr && textLength > 0)
      return nullArgument(fn, "text");
    if (count == nullptr)
      return nullArgument(fn, "count");
    if (ids == nullptr && capacity > 0)
      return nullArgument(fn, "ids");
    std::vector<int32_t> encoded = handle->engine->tokenizer().encode(
        std::string_view(text != nullptr ? text : "", textLength), addSpecial != 0);
    *count = encoded.size();
    if (encoded.size() > capacity)
      return fail(LLMC_STATUS_BUFFER_TOO_SMALL,
                  std::string(fn) + ": the text has " + std::to_string(encoded.size()) +
                      " tokens, more than the capacity " + std::to_string(capacity));
    std::copy(encoded.begin(), encoded.end(), ids);
    return LLMC_STATUS_OK;
  });
}

llmc_status llmc_detokenize(const llmc_engine *handle, const int32_t *ids, size_t count,
                            int skipSpecial, char *text, size_t capacity, size_t *length) {
  const char *fn = "llmc_detokenize";
  return guarded(fn, [&]() -> llmc_status {
    if (handle == nullptr)
      return nullArgument(fn, "engine");
    if (ids == nullptr && count > 0)
      return nullArgument(fn, "ids");
    if (length == nullptr)
      return nullArgument(fn, "length");
    if (text == nullptr && capacity > 0)
      return nullArgument(fn, "text");
    std::string decoded = handle->engine->tokenizer().decode(
        std::vector<int32_t>(ids, ids + count), skipSpecial != 0);
    *length = decoded.size();
    if (decoded.size() + 1 > capacity)
      return fail(LLMC_STATUS_BUFFER_TOO_SMALL,
                  std::string(fn) + ": the text needs " + std::to_string(decoded.size() + 1) +
                      " bytes with its NUL, more than the capacity " + std::to_string(capacity));
    std::memcpy(text, decoded.data(), decoded.size());
    text[decoded.size()] = '\0';
    return LLMC_STATUS_OK;
  });
}

void llmc_sampling_params_init(llmc_sampling_params *params) {
  if (params == nullptr)
    return;
  *params = llmc_sampling_params{};
  params->struct_size = sizeof(llmc_sampling_params);
  params->temperature = 0.0f;
  params->top_k = 0;
  params->top_p = 1.0f;
  params->min_p = 0.0f;
  params->repetition_penalty = 1.0f;
  params->seed = 0;
}

llmc_status llmc_sampler_create(const llmc_sampling_params *given, llmc_sampler **out) {
  const char *fn = "llmc_sampler_create";
  return guarded(fn, [&]() -> llmc_status {
    if (out == nullptr)
      return nullArgument(fn, "sampler");
    *out = nullptr;
    if (given != nullptr)
      if (llmc_status s = checkStructSize(fn, given->struct_size, sizeof(uint32_t) * 2); s)
        return s;
    llmc_sampling_params p = withDefaults(given, llmc_sampling_params_init);
    auto sampler = llmc::sampling::Sampler::create(toSamplingParams(p));
    if (!sampler)
      return fromStatus(sampler.status(), LLMC_STATUS_INVALID_ARGUMENT);
    *out = new llmc_sampler(std::move(*sampler));
    return LLMC_STATUS_OK;
  });
}

void llmc_sampler_free(llmc_sampler *sampler) { delete sampler; }

llmc_status llmc_sampler_sample(llmc_sampler *sampler, const float *logits, size_t vocabSize,
                                const int32_t *seen, size_t numSeen, int32_t *token) {
  const char *fn = "llmc_sampler_sample";
  return guarded(fn, [&]() -> llmc_status {
    if (llmc_status bad = checkSampleArguments(fn, sampler, token, seen, numSeen, vocabSize);
        bad != LLMC_STATUS_OK)
      return bad;
    if (logits == nullptr)
      return nullArgument(fn, "logits");
    *token = sampler->sampler.sample(logits, static_cast<int32_t>(vocabSize), seen,
                                     static_cast<int64_t>(numSeen));
    return LLMC_STATUS_OK;
  });
}

void llmc_generate_params_init(llmc_generate_params *params) {
  if (params == nullptr)
    return;
  *params = llmc_generate_params{};
  params->struct_size = sizeof(llmc_generate_params);
  llmc_sampling_params_init(&params->sampling);
  params->max_new_tokens = 128;
  params->add_special = 1;
  params->ignore_eos = 0;
}

llmc_status llmc_generate(llmc_engine *handle, const char *prompt, size_t promptLength,
                          const llmc_generate_params *given, llmc_text_callback callback,
                          void *userData, llmc_generate_result *result) {
  const char *fn = "llmc_generate";
  return guarded(fn, [&]() -> llmc_status {
    if (handle == nullptr)
      return nullArgument(fn, "engine");
    if (llmc_status s = refuseWhenScheduled(fn, *handle); s)
      return s;
    if (prompt == nullptr && promptLength > 0)
      return nullArgument(fn, "prompt");
    if (given != nullptr)
      if (llmc_status s = checkStructSize(fn, given->struct_size, sizeof(uint32_t) * 2); s)
        return s;
    llmc_generate_params p = withDefaults(given, llmc_generate_params_init);
    if (p.max_new_tokens < 1)
      return fail(LLMC_STATUS_INVALID_ARGUMENT,
                  std::string(fn) + ": max_new_tokens must be >= 1, got " +
                      std::to_string(p.max_new_tokens));
    llmc::Engine &engine = *handle->engine;
    std::vector<int32_t> ids = engine.tokenizer().encode(
        std::string_view(prompt != nullptr ? prompt : "", promptLength), p.add_special != 0);
    if (ids.empty())
      return fail(LLMC_STATUS_INVALID_ARGUMENT,
                  std::string(fn) + ": the prompt has no tokens (an empty prompt without "
                                    "add_special gives nothing to start from)");
    llmc::GenerateOptions options;
    options.maxNewTokens = p.max_new_tokens;
    options.sampling = toSamplingParams(p.sampling);
    options.ignoreEos = p.ignore_eos != 0;
    bool cancelled = false;
    llmc::TextCallback onText = nullptr;
    if (callback != nullptr)
      onText = [&](size_t, const std::string &piece) {
        if (!cancelled && callback(piece.data(), piece.size(), userData) != 0)
          cancelled = true;
      };
    options.shouldStop = [&](size_t) { return cancelled; };
    llmc::GenerateTimings timings;
    auto results = llmc::generateBatch(engine, {ids}, options, &timings, onText);
    if (!results)
      return fromStatus(results.status(), results.message().find("KV cache full") !=
                                                  std::string::npos
                                              ? LLMC_STATUS_KV_CACHE_FULL
                                              : LLMC_STATUS_FAILED);
    if (result != nullptr) {
      const llmc::GenerateResult &r = results->front();
      *result = llmc_generate_result{};
      result->prompt_tokens = static_cast<int64_t>(r.promptIds.size());
      result->generated_tokens = static_cast<int64_t>(r.ids.size());
      result->finish_reason = cancelled               ? LLMC_FINISH_CANCELLED
                              : r.finishReason == "stop" ? LLMC_FINISH_STOP
                                                         : LLMC_FINISH_LENGTH;
      result->prefill_seconds = timings.prefillSeconds;
      result->decode_seconds = timings.decodeSeconds;
    }
    return LLMC_STATUS_OK;
  });
}

llmc_status llmc_sequence_add(llmc_engine *handle, llmc_sequence_id *sequence) {
  const char *fn = "llmc_sequence_add";
  return guarded(fn, [&]() -> llmc_status {
    if (handle == nullptr)
      return nullArgument(fn, "engine");
    if (llmc_status s = refuseWhenScheduled(fn, *handle); s)
      return s;
    if (sequence == nullptr)
      return nullArgument(fn, "sequence");
    *sequence = handle->engine->addSequence();
    return LLMC_STATUS_OK;
  });
}

llmc_status llmc_sequence_release(llmc_engine *handle, llmc_sequence_id sequence) {
  const char *fn = "llmc_sequence_release";
  return guarded(fn, [&]() -> llmc_status {
    if (handle == nullptr)
      return nullArgument(fn, "engine");
    if (llmc_status s = refuseWhenScheduled(fn, *handle); s)
      return s;
    return fromStatus(handle->engine->releaseSequence(sequence), LLMC_STATUS_INVALID_ARGUMENT);
  });
}

llmc_status llmc_sequence_length(const llmc_engine *handle, llmc_sequence_id sequence,
                                 int64_t *length) {
  const char *fn = "llmc_sequence_length";
  return guarded(fn, [&]() -> llmc_status {
    if (handle == nullptr)
      return nullArgument(fn, "engine");
    if (length == nullptr)
      return nullArgument(fn, "length");
    *length = handle->engine->sequenceLength(sequence);
    return LLMC_STATUS_OK;
  });
}

llmc_status llmc_step(llmc_engine *handle, const llmc_step_entry *entries, size_t numEntries,
                      float *logits, size_t capacity) {
  const char *fn = "llmc_step";
  return guarded(fn, [&]() -> llmc_status {
    if (handle == nullptr)
      return nullArgument(fn, "engine");
    if (llmc_status s = refuseWhenScheduled(fn, *handle); s)
      return s;
    if (entries == nullptr || numEntries == 0)
      return fail(LLMC_STATUS_INVALID_ARGUMENT, std::string(fn) + ": no entries to step");
    if (logits == nullptr)
      return nullArgument(fn, "logits");
    llmc::Engine &engine = *handle->engine;
    const size_t vocab = static_cast<size_t>(engine.vocabSize());
    if (capacity / vocab < numEntries)
      return fail(LLMC_STATUS_BUFFER_TOO_SMALL,
                  std::string(fn) + ": the logits need " + std::to_string(numEntries) + " x " +
                      std::to_string(vocab) + " floats, more than the capacity " +
                      std::to_string(capacity));
    std::vector<llmc::SequenceTokens> batch(numEntries);
    for (size_t i = 0; i < numEntries; ++i) {
      if (entries[i].tokens == nullptr || entries[i].num_tokens == 0)
        return fail(LLMC_STATUS_INVALID_ARGUMENT,
                    std::string(fn) + ": entry " + std::to_string(i) + " has no tokens");
      batch[i].sequence = entries[i].sequence;
      batch[i].tokens.assign(entries[i].tokens, entries[i].tokens + entries[i].num_tokens);
    }
    auto rows = engine.step(batch, /*allLogits=*/false);
    if (!rows)
      return fromStatus(rows.status(),
                        rows.message().find("KV cache full") != std::string::npos
                            ? LLMC_STATUS_KV_CACHE_FULL
                            : LLMC_STATUS_FAILED);
    std::memcpy(logits, *rows, numEntries * vocab * sizeof(float));
    return LLMC_STATUS_OK;
  });
}

} // extern "C"
