/*
 * llmc.h: the C API of the llmc runtime (C99; no C++ types cross it).
 *
 * Load an engine plan built by `llmc build`, inspect the model, tokenize and
 * detokenize, render chat templates, generate text with a per-piece
 * callback, drive the batch step yourself (add sequences, step them with
 * per-row outputs, sample), or hand requests to the server's scheduler
 * (continuous batching, chunked prefill, prefix caching) as an object.
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
 *     run on different threads). The same holds for a scheduler and the
 *     engine under it, together; a parsed chat template is immutable and
 *     may be rendered from any number of threads at once.
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
  LLMC_STATUS_FAILED = 5,           /* any other error; llmc_last_error() says which */
  LLMC_STATUS_NOT_FOUND = 6,        /* the plan has no such thing (a chat template, a sequence) */
  LLMC_STATUS_TEMPLATE_ERROR = 7,   /* a chat template failed to parse or render (raise_exception
                                       included); the message names the line and column */
  LLMC_STATUS_BUSY = 8              /* the engine is driven by a scheduler (llmc_scheduler_create)
                                       and cannot be stepped by hand until it is destroyed */
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
  const char *kv_cache_dtype; /* "auto" (default; NULL too), "f32" or "f16" (the CPU's KV cache
                                 in half the memory, K and V rounded to f16) */
} llmc_engine_options;

/* Defaults: device "auto", all cores, one sequence, 0.9 of the GPU, verify,
 * KV cache type "auto". */
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
  LLMC_FINISH_STOP = 0,      /* an EOS token (or a stop id or string of a request) */
  LLMC_FINISH_LENGTH = 1,    /* max_new_tokens, or the plan's max_seq_len */
  LLMC_FINISH_CANCELLED = 2, /* the callback returned nonzero, or the request was cancelled */
  LLMC_FINISH_ERROR = 3      /* a scheduler request whose engine step failed */
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

/* One batch step with per-row outputs: each entry asks for its own kind of
 * result, so a step can serve greedy, top-k and fully sampled sequences at
 * once without copying every row's logits. */
typedef enum llmc_output_kind {
  LLMC_OUTPUT_ARGMAX = 0, /* the id of the largest logit (the first on ties): greedy */
  LLMC_OUTPUT_TOP_K = 1,  /* the top-k candidates at the entry's top_k and temperature */
  LLMC_OUTPUT_LOGITS = 2  /* the full row of vocab_size logits */
} llmc_output_kind;

typedef struct llmc_step_request {
  llmc_sequence_id sequence;
  const int32_t *tokens;   /* the sequence's new tokens: a prompt chunk, or one decode token */
  size_t num_tokens;       /* >= 1 */
  llmc_output_kind output; /* what to compute for the last new token */
  int32_t top_k;           /* LLMC_OUTPUT_TOP_K: 1 .. 64, below vocab_size */
  float temperature;       /* LLMC_OUTPUT_TOP_K: > 0 (scores are logits / temperature) */
} llmc_step_request;

/* One entry's result. The pointers point into the engine and stay valid
 * until the next step, scheduler iteration or close of that engine. */
typedef struct llmc_step_row {
  llmc_output_kind kind;     /* what was asked */
  int32_t token;             /* ARGMAX: the id */
  int32_t num_candidates;    /* TOP_K: how many tie with or beat the k-th score (>= top_k) */
  const float *scores;       /* TOP_K: [num_candidates] logit / temperature, descending; NULL
                                when num_candidates > 128 (then `logits` is set) */
  const int32_t *candidates; /* TOP_K: [num_candidates] their ids (same order as scores) */
  const float *logits;       /* LOGITS (and TOP_K with NULL scores): [vocab_size] */
} llmc_step_row;

/* Runs one batch step over `num_requests` sequences (each at most once) and
 * fills rows[i] for request i (`capacity` rows of room). All or nothing, as
 * llmc_step. */
LLMC_API llmc_status llmc_step_outputs(llmc_engine *engine, const llmc_step_request *requests,
                                       size_t num_requests, llmc_step_row *rows,
                                       size_t capacity);

/* Fills `request`'s output, top_k and temperature with the cheapest kind
 * that `sampler` can draw its next token from exactly: ARGMAX for greedy
 * without penalty, TOP_K when its top_k is on with a temperature and no
 * penalty, LOGITS otherwise. */
LLMC_API llmc_status llmc_sampler_output_kind(const llmc_sampler *sampler, size_t vocab_size,
                                              llmc_step_request *request);

/* Picks the next token from one step row, whatever its kind: ARGMAX takes
 * the id, TOP_K draws from the candidates (the same token, and random state
 * change, as llmc_sampler_sample on the full logits), LOGITS samples the
 * row. `seen` as in llmc_sampler_sample. A TOP_K row must have been asked
 * at the sampler's own top_k and temperature (llmc_sampler_output_kind fills
 * them in). Fails when the row's kind cannot give what the sampler needs
 * (e.g. an ARGMAX row for a sampler with a temperature). */
LLMC_API llmc_status llmc_sampler_sample_row(llmc_sampler *sampler, const llmc_step_row *row,
                                             size_t vocab_size, const int32_t *seen,
                                             size_t num_seen, int32_t *token);

/* ---- chat templates ------------------------------------------------------ */

/* A parsed Jinja chat template (Hugging Face tokenizer_config.json's
 * chat_template dialect, rendered as transformers' apply_chat_template does;
 * docs/chat.md). Immutable: render it from any thread. */
typedef struct llmc_chat_template llmc_chat_template;

/* Parses `source` (source_length bytes). `name` names the template in error
 * messages ("<name>:<line>:<column>: ..."); NULL: "chat template". A syntax
 * error is LLMC_STATUS_TEMPLATE_ERROR. */
LLMC_API llmc_status llmc_chat_template_parse(const char *source, size_t source_length,
                                              const char *name, llmc_chat_template **tmpl);

/* The plan's chat template `name` (NULL: "default", the model's own), with
 * the plan's special token strings (bos_token, eos_token, pad_token,
 * unk_token) as variables of every render. LLMC_STATUS_NOT_FOUND when the
 * plan has none of that name (the message lists those it has). The template
 * does not depend on the engine afterwards. */
LLMC_API llmc_status llmc_engine_chat_template(const llmc_engine *engine, const char *name,
                                               llmc_chat_template **tmpl);

LLMC_API void llmc_chat_template_free(llmc_chat_template *tmpl);

/* One message of a conversation: NUL-terminated UTF-8. */
typedef struct llmc_chat_message {
  const char *role;    /* "system", "user", "assistant", "tool", ... */
  const char *content;
} llmc_chat_message;

typedef struct llmc_chat_render_options {
  uint32_t struct_size;          /* sizeof(llmc_chat_render_options), set by the init function */
  int32_t add_generation_prompt; /* nonzero: end with the assistant turn's opening */
  /* A JSON object of extra variables, as apply_chat_template's keyword
   * arguments (bos_token, tools, documents, enable_thinking, date_string,
   * ...); its keys win over the plan's special tokens. NULL: none. */
  const char *context_json;
  size_t context_json_length;
  int32_t fixed_time;    /* nonzero: strftime_now() formats `time_seconds` (UTC) */
  int64_t time_seconds;  /* seconds since the Unix epoch, with fixed_time */
} llmc_chat_render_options;

/* Defaults: no generation prompt, no extra context, the local clock. */
LLMC_API void llmc_chat_render_options_init(llmc_chat_render_options *options);

/* Renders `messages_json` (messages_length bytes: a JSON array of message
 * objects, each with at least "role"; extra keys such as "tool_calls" reach
 * the template; key order is kept) into `text`: *length gets the byte
 * length without the NUL; `capacity` must hold *length + 1 bytes. Bad JSON
 * is LLMC_STATUS_INVALID_ARGUMENT; a template error (raise_exception, a
 * limit hit) LLMC_STATUS_TEMPLATE_ERROR. `options` may be NULL. */
LLMC_API llmc_status llmc_chat_render_json(const llmc_chat_template *tmpl,
                                           const char *messages_json, size_t messages_length,
                                           const llmc_chat_render_options *options, char *text,
                                           size_t capacity, size_t *length);

/* The same over `num_messages` role/content structs. */
LLMC_API llmc_status llmc_chat_render(const llmc_chat_template *tmpl,
                                      const llmc_chat_message *messages, size_t num_messages,
                                      const llmc_chat_render_options *options, char *text,
                                      size_t capacity, size_t *length);

/* ---- the scheduler: the server's serving core as an object --------------- */

/* Continuous batching over one engine, as `llmrun serve` does it: requests
 * wait, are admitted while the token budget and the sequence cap allow,
 * long prompts are prefilled in chunks, a request that does not fit in the
 * KV cache is preempted and later recomputed (same output), and full prompt
 * blocks are shared through the prefix cache. Each llmc_scheduler_step is
 * one engine step for every running request.
 *
 * Thread-safety: a scheduler and its engine are used from one thread at a
 * time (callbacks run inside llmc_scheduler_step on the calling thread and
 * may call llmc_scheduler_submit and llmc_scheduler_cancel, nothing else of
 * this scheduler). While a scheduler exists its engine refuses
 * llmc_generate, llmc_step*, and llmc_sequence_add with LLMC_STATUS_BUSY;
 * tokenizer, model info and chat templates stay usable. */
typedef struct llmc_scheduler llmc_scheduler;
typedef int64_t llmc_request_id;

typedef struct llmc_scheduler_options {
  uint32_t struct_size;           /* sizeof(llmc_scheduler_options), set by the init function */
  int64_t max_num_seqs;           /* running requests at most, >= 1 */
  int64_t max_num_batched_tokens; /* tokens per step (decode tokens + prefill chunks), >= 1 */
  int32_t prefix_caching;         /* nonzero: share cached full prompt blocks between requests */
} llmc_scheduler_options;

/* Defaults: 256 sequences, 2048 tokens a step, prefix caching on. */
LLMC_API void llmc_scheduler_options_init(llmc_scheduler_options *options);

/* A scheduler over `engine`, which must outlive it (close the engine only
 * after llmc_scheduler_destroy). `options` may be NULL. */
LLMC_API llmc_status llmc_scheduler_create(llmc_engine *engine,
                                           const llmc_scheduler_options *options,
                                           llmc_scheduler **scheduler);

/* Ends every request still in it (their callbacks get
 * LLMC_FINISH_CANCELLED), frees their KV blocks and the scheduler. */
LLMC_API void llmc_scheduler_destroy(llmc_scheduler *scheduler);

typedef struct llmc_request_params {
  uint32_t struct_size;        /* sizeof(llmc_request_params), set by the init function */
  /* The prompt: text (tokenized with add_special) or ids, exactly one. */
  const char *prompt;
  size_t prompt_length;
  const int32_t *prompt_ids;
  size_t num_prompt_ids;
  int32_t add_special;         /* text prompts: nonzero adds BOS etc. */
  llmc_sampling_params sampling; /* its seed seeds this request alone */
  int64_t max_tokens;          /* generated tokens at most, >= 1 (also capped by max_seq_len) */
  int64_t min_tokens;          /* EOS, stop ids and stop strings are not honoured before this */
  int32_t ignore_eos;          /* nonzero: do not stop at the plan's EOS ids */
  const int32_t *stop_token_ids; /* extra ids that end the request (not emitted) */
  size_t num_stop_token_ids;
  const char *const *stop;     /* stop strings (NUL-terminated): the text ends right before the
                                  first one that appears; it is not part of the output */
  size_t num_stop;
  float presence_penalty;      /* OpenAI's, in [-2, 2] */
  float frequency_penalty;     /* OpenAI's, in [-2, 2] */
} llmc_request_params;

/* Defaults: no prompt, BOS added, greedy, 16 tokens, no stops, no penalties. */
LLMC_API void llmc_request_params_init(llmc_request_params *params);

/* One step's news for one request. Every accepted request gets zero or more
 * token events and then exactly one with finished nonzero (which may carry
 * a last token and text too). Pointers are valid during the callback, or
 * until the next llmc_scheduler_step / llmc_scheduler_poll for polled events. */
typedef struct llmc_request_event {
  llmc_request_id id;
  int32_t token;          /* the new token, or -1 when the event carries none */
  const char *text;       /* newly visible text (whole UTF-8 characters; NUL-terminated) */
  size_t text_length;
  int32_t finished;       /* nonzero: the last event of this request */
  llmc_finish_reason finish_reason; /* when finished: STOP (EOS, stop id or stop string),
                                       LENGTH, CANCELLED or LLMC_FINISH_ERROR */
  const char *error;      /* LLMC_FINISH_ERROR: the message; else "" */
  int64_t prompt_tokens;
  int64_t generated_tokens;     /* tokens emitted so far */
  int64_t cached_prompt_tokens; /* prompt tokens the prefix cache served */
} llmc_request_event;

/* Called for each event of a request submitted with it, from inside
 * llmc_scheduler_step. Return 0 to go on, nonzero to cancel the request
 * (its final CANCELLED event comes at the next step). */
typedef int (*llmc_request_callback)(const llmc_request_event *event, void *user_data);

/* Validates and queues a request. With `callback` NULL its events are kept
 * for llmc_scheduler_poll. A request that can never be served (an empty
 * prompt, an id outside the vocabulary, prompt + max_tokens over the plan's
 * max_seq_len, more KV than the whole cache, a parameter out of range) is
 * LLMC_STATUS_INVALID_ARGUMENT, naming the field. */
LLMC_API llmc_status llmc_scheduler_submit(llmc_scheduler *scheduler,
                                           const llmc_request_params *params,
                                           llmc_request_callback callback, void *user_data,
                                           llmc_request_id *id);

/* Cancels a request at the next step (its last event says CANCELLED).
 * Unknown or finished ids are LLMC_STATUS_NOT_FOUND. */
LLMC_API llmc_status llmc_scheduler_cancel(llmc_scheduler *scheduler, llmc_request_id id);

/* One iteration: one engine step for every running request, then the
 * callbacks (in request order). *has_work (may be NULL) gets whether
 * anything is left to do. An engine failure ends the running requests with
 * LLMC_FINISH_ERROR and is not a failure of this call. */
LLMC_API llmc_status llmc_scheduler_step(llmc_scheduler *scheduler, int32_t *has_work);

/* Steps until no request is left. */
LLMC_API llmc_status llmc_scheduler_run(llmc_scheduler *scheduler);

/* Moves up to `capacity` queued events of requests submitted without a
 * callback into `events`, oldest first; *count gets how many. Their text
 * stays valid until the next poll or step. */
LLMC_API llmc_status llmc_scheduler_poll(llmc_scheduler *scheduler, llmc_request_event *events,
                                         size_t capacity, size_t *count);

typedef struct llmc_scheduler_stats {
  int64_t running;
  int64_t waiting;
  double kv_usage;           /* 0..1 of the KV blocks in use */
  int64_t prefix_query_tokens;
  int64_t prefix_hit_tokens;
  int64_t preemptions;
  int64_t prompt_tokens;
  int64_t generation_tokens;
  int64_t finished;
  int64_t cancelled;
} llmc_scheduler_stats;

LLMC_API llmc_status llmc_scheduler_get_stats(const llmc_scheduler *scheduler,
                                              llmc_scheduler_stats *stats);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LLMC_LLMC_H */
