/*
 * llmc.h: the C API of the llmc runtime (C99; no C++ types cross it).
 *
 * Load an engine plan built by `llmc build`, inspect the model, tokenize and
 * detokenize, generate text with a per-piece callback, or drive the batch
 * step yourself (add sequences, step them, sample from the logits).
 *
 * Conventions
 *   - Every fallible function returns an llmc_status. On failure the calling
 *     thread's llmc_last_error() holds a message naming what is wrong (the
 *     file, the field, the value, the fix); on success it is left as it was.
 *   - Handles are opaque and created/freed in pairs (llmc_engine_open /
 *     llmc_engine_close, llmc_sampler_create / llmc_sampler_free). Freeing
 *     NULL is a no-op.
 *   - Every output buffer comes with its capacity. When it is too small the
 *     call fails with LLMC_STATUS_BUFFER_TOO_SMALL, writes nothing into it,
 *     and still reports the size needed through the count/length pointer.
 *   - Option structs start with `struct_size`: fill them with the matching
 *     *_init function first, so a program built against this header keeps
 *     working with a later library that adds fields at the end.
 *   - No function aborts, exits or lets an exception out. An engine is not
 *     thread-safe: use one from one thread at a time (different engines may
 *     run on different threads).
 *
 * Link: pkg-config --cflags --libs llmc, or find_package(llmc) and the
 * imported target llmc::runtime (docs/c-api.md).
 */
#ifndef LLMC_LLMC_H
#define LLMC_LLMC_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define LLMC_API
#elif defined(LLMC_BUILDING_LIBRARY)
#define LLMC_API __attribute__((visibility("default")))
#else
#define LLMC_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status and version ------------------------------------------------ */

typedef enum llmc_status {
  LLMC_STATUS_OK = 0,
  LLMC_STATUS_INVALID_ARGUMENT = 1, /* a NULL handle or pointer, a value out of range */
  LLMC_STATUS_LOAD_FAILED = 2,      /* the plan could not be opened, validated or placed */
  LLMC_STATUS_BUFFER_TOO_SMALL = 3, /* see the size reported through the count pointer */
  LLMC_STATUS_KV_CACHE_FULL = 4,    /* the step needs more KV blocks than are free */
  LLMC_STATUS_FAILED = 5            /* any other error; llmc_last_error() says which */
} llmc_status;

/* A short constant name for a status ("ok", "invalid argument", ...). */
LLMC_API const char *llmc_status_name(llmc_status status);

/* The message of the last failed call on this thread ("" if none). Valid
 * until this thread's next failing call. */
LLMC_API const char *llmc_last_error(void);

/* The library's version, e.g. "0.1.0". */
LLMC_API const char *llmc_version(void);

/* ---- engines ----------------------------------------------------------- */

typedef struct llmc_engine llmc_engine;

typedef struct llmc_engine_options {
  uint32_t struct_size;       /* sizeof(llmc_engine_options), set by the init function */
  const char *device;         /* "auto" (default: a GPU when one can run the plan), "cpu", "cuda" */
  int32_t threads;            /* CPU threads; 0: all cores */
  int64_t kv_cache_tokens;    /* KV cache token slots; 0: max_seq_len * max_sequences */
  int64_t max_sequences;      /* sequences the KV cache is sized for when kv_cache_tokens is 0 */
  double gpu_memory_fraction; /* of the GPU's memory for weights, activations and KV (0, 1] */
  int32_t verify_weights;     /* nonzero: recompute the plan's weight checksum at load */
} llmc_engine_options;

/* Defaults: device "auto", all cores, one sequence, 0.9 of the GPU, verify. */
LLMC_API void llmc_engine_options_init(llmc_engine_options *options);

/* Opens and validates the plan at `plan_path` and loads it onto a device.
 * `options` may be NULL (the defaults). On success *engine is the handle. */
LLMC_API llmc_status llmc_engine_open(const char *plan_path, const llmc_engine_options *options,
                                      llmc_engine **engine);

LLMC_API void llmc_engine_close(llmc_engine *engine);

typedef struct llmc_model_info {
  char architecture[64]; /* e.g. "LlamaForCausalLM", NUL-terminated (truncated to fit) */
  char backend[160];     /* where it runs, e.g. "cpu (avx2, 2 threads)", NUL-terminated */
  int64_t vocab_size;
  int64_t max_seq_len;   /* prompt + generated tokens of one sequence */
  int64_t num_layers;
  int64_t hidden_size;
  int64_t num_heads;
  int64_t num_kv_heads;
  int64_t head_dim;
  int32_t bos_id;        /* -1 when the model has none */
  int32_t eos_id;        /* the first of the model's EOS ids; -1 when none */
  int32_t synthetic;     /* nonzero: generated weights (a benchmark plan; its text is noise) */
} llmc_model_info;

LLMC_API llmc_status llmc_engine_model_info(const llmc_engine *engine, llmc_model_info *info);

/* ---- tokenizer --------------------------------------------------------- */

/* Encodes `text` (text_length bytes of UTF-8; ill-formed sequences become
 * U+FFFD) with the plan's tokenizer, as Hugging Face's
 * encode(text, add_special_tokens=add_special) does. Writes up to
 * `capacity` ids to `ids` and the count to *count. */
LLMC_API llmc_status llmc_tokenize(const llmc_engine *engine, const char *text, size_t text_length,
                                   int add_special, int32_t *ids, size_t capacity, size_t *count);

/* Decodes `count` ids into `text` as Hugging Face's decode does. *length
 * receives the byte length without the terminating NUL; `capacity` must hold
 * *length + 1 bytes (the text is always NUL-terminated). */
LLMC_API llmc_status llmc_detokenize(const llmc_engine *engine, const int32_t *ids, size_t count,
                                     int skip_special, char *text, size_t capacity,
                                     size_t *length);

/* ---- sampling ---------------------------------------------------------- */

typedef struct llmc_sampling_params {
  uint32_t struct_size;     /* sizeof(llmc_sampling_params), set by the init function */
  float temperature;        /* 0: greedy */
  int32_t top_k;            /* 0: off */
  float top_p;              /* 1: off; in (0, 1] */
  float min_p;              /* 0: off; in [0, 1] */
  float repetition_penalty; /* 1: off; > 0 */
  uint64_t seed;            /* the same seed and logits give the same tokens everywhere */
} llmc_sampling_params;

/* Defaults: greedy (temperature 0), no filters, seed 0. */
LLMC_API void llmc_sampling_params_init(llmc_sampling_params *params);

typedef struct llmc_sampler llmc_sampler;

/* A sampler with its own random state (one per sequence). Fails, naming the
 * field, when a parameter is out of range. */
LLMC_API llmc_status llmc_sampler_create(const llmc_sampling_params *params,
                                         llmc_sampler **sampler);
LLMC_API void llmc_sampler_free(llmc_sampler *sampler);

/* Picks the next token from one row of `vocab_size` logits. `seen` (the
 * sequence so far, prompt included; may be NULL when num_seen is 0) feeds
 * the repetition penalty. */
LLMC_API llmc_status llmc_sampler_sample(llmc_sampler *sampler, const float *logits,
                                         size_t vocab_size, const int32_t *seen, size_t num_seen,
                                         int32_t *token);

/* ---- one-call generation ------------------------------------------------ */

typedef enum llmc_finish_reason {
  LLMC_FINISH_STOP = 0,     /* an EOS token */
  LLMC_FINISH_LENGTH = 1,   /* max_new_tokens, or the plan's max_seq_len */
  LLMC_FINISH_CANCELLED = 2 /* the callback returned nonzero */
} llmc_finish_reason;

typedef struct llmc_generate_params {
  uint32_t struct_size;          /* sizeof(llmc_generate_params), set by the init function */
  llmc_sampling_params sampling;
  int64_t max_new_tokens;        /* >= 1; also capped by the plan's max_seq_len */
  int32_t add_special;           /* nonzero: the tokenizer adds BOS etc. to the prompt */
  int32_t ignore_eos;            /* nonzero: keep generating past EOS tokens */
} llmc_generate_params;

/* Defaults: greedy, 128 new tokens, special tokens added, stop at EOS. */
LLMC_API void llmc_generate_params_init(llmc_generate_params *params);

/* Receives each newly complete piece of text (always whole UTF-8 characters;
 * `piece` is not NUL-terminated). Return 0 to go on, nonzero to stop: the
 * generation then ends with LLMC_FINISH_CANCELLED. */
typedef int (*llmc_text_callback)(const char *piece, size_t length, void *user_data);

typedef struct llmc_generate_result {
  int64_t prompt_tokens;
  int64_t generated_tokens;
  llmc_finish_reason finish_reason;
  double prefill_seconds; /* the prompt's step: time to the first token */
  double decode_seconds;  /* every later step */
} llmc_generate_result;

/* Tokenizes `prompt`, generates, and streams the text through `callback`
 * (may be NULL). `params` may be NULL (the defaults); `result` may be NULL. */
LLMC_API llmc_status llmc_generate(llmc_engine *engine, const char *prompt, size_t prompt_length,
                                   const llmc_generate_params *params,
                                   llmc_text_callback callback, void *user_data,
                                   llmc_generate_result *result);

/* ---- the batch step, for embedders who schedule themselves -------------- */

typedef int64_t llmc_sequence_id;

/* A new, empty sequence with its own KV block table. */
LLMC_API llmc_status llmc_sequence_add(llmc_engine *engine, llmc_sequence_id *sequence);
/* Frees the sequence's KV blocks. */
LLMC_API llmc_status llmc_sequence_release(llmc_engine *engine, llmc_sequence_id sequence);
/* Tokens the sequence holds in the KV cache. */
LLMC_API llmc_status llmc_sequence_length(const llmc_engine *engine, llmc_sequence_id sequence,
                                          int64_t *length);

typedef struct llmc_step_entry {
  llmc_sequence_id sequence;
  const int32_t *tokens; /* the sequence's new tokens: a prompt chunk, or one decode token */
  size_t num_tokens;     /* >= 1 */
} llmc_step_entry;

/* Runs one batch step over `num_entries` sequences (each at most once) and
 * writes the logits of each entry's last new token to `logits`, row i for
 * entry i: [num_entries, vocab_size] floats, `capacity` floats of room.
 * All or nothing: when the KV cache cannot hold every entry's tokens it fails
 * with LLMC_STATUS_KV_CACHE_FULL and no sequence changes (release one and
 * retry). */
LLMC_API llmc_status llmc_step(llmc_engine *engine, const llmc_step_entry *entries,
                               size_t num_entries, float *logits, size_t capacity);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LLMC_LLMC_H */
