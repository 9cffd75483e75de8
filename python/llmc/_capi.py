"""ctypes declarations of include/llmc/llmc.h, kept in the header's order."""

import ctypes
import ctypes.util
import os

c_status = ctypes.c_int
STATUS_OK = 0
STATUS_BUFFER_TOO_SMALL = 3
FINISH_REASONS = {0: "stop", 1: "length", 2: "cancelled", 3: "error"}


class EngineOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("device", ctypes.c_char_p),
        ("threads", ctypes.c_int32),
        ("kv_cache_tokens", ctypes.c_int64),
        ("max_sequences", ctypes.c_int64),
        ("gpu_memory_fraction", ctypes.c_double),
        ("verify_weights", ctypes.c_int32),
        ("kv_cache_dtype", ctypes.c_char_p),
    ]


class ModelInfoStruct(ctypes.Structure):
    _fields_ = [
        ("architecture", ctypes.c_char * 64),
        ("backend", ctypes.c_char * 160),
        ("vocab_size", ctypes.c_int64),
        ("max_seq_len", ctypes.c_int64),
        ("num_layers", ctypes.c_int64),
        ("hidden_size", ctypes.c_int64),
        ("num_heads", ctypes.c_int64),
        ("num_kv_heads", ctypes.c_int64),
        ("head_dim", ctypes.c_int64),
        ("bos_id", ctypes.c_int32),
        ("eos_id", ctypes.c_int32),
        ("synthetic", ctypes.c_int32),
    ]


class SamplingParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("temperature", ctypes.c_float),
        ("top_k", ctypes.c_int32),
        ("top_p", ctypes.c_float),
        ("min_p", ctypes.c_float),
        ("repetition_penalty", ctypes.c_float),
        ("seed", ctypes.c_uint64),
    ]


class GenerateParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("sampling", SamplingParams),
        ("max_new_tokens", ctypes.c_int64),
        ("add_special", ctypes.c_int32),
        ("ignore_eos", ctypes.c_int32),
    ]


class GenerateResultStruct(ctypes.Structure):
    _fields_ = [
        ("prompt_tokens", ctypes.c_int64),
        ("generated_tokens", ctypes.c_int64),
        ("finish_reason", ctypes.c_int),
        ("prefill_seconds", ctypes.c_double),
        ("decode_seconds", ctypes.c_double),
    ]


class ChatRenderOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("add_generation_prompt", ctypes.c_int32),
        ("context_json", ctypes.c_char_p),
        ("context_json_length", ctypes.c_size_t),
        ("fixed_time", ctypes.c_int32),
        ("time_seconds", ctypes.c_int64),
    ]


class SchedulerOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("max_num_seqs", ctypes.c_int64),
        ("max_num_batched_tokens", ctypes.c_int64),
        ("prefix_caching", ctypes.c_int32),
    ]


class RequestParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("prompt", ctypes.c_char_p),
        ("prompt_length", ctypes.c_size_t),
        ("prompt_ids", ctypes.POINTER(ctypes.c_int32)),
        ("num_prompt_ids", ctypes.c_size_t),
        ("add_special", ctypes.c_int32),
        ("sampling", SamplingParams),
        ("max_tokens", ctypes.c_int64),
        ("min_tokens", ctypes.c_int64),
        ("ignore_eos", ctypes.c_int32),
        ("stop_token_ids", ctypes.POINTER(ctypes.c_int32)),
        ("num_stop_token_ids", ctypes.c_size_t),
        ("stop", ctypes.POINTER(ctypes.c_char_p)),
        ("num_stop", ctypes.c_size_t),
        ("presence_penalty", ctypes.c_float),
        ("frequency_penalty", ctypes.c_float),
    ]


class RequestEvent(ctypes.Structure):
    _fields_ = [
        ("id", ctypes.c_int64),
        ("token", ctypes.c_int32),
        ("text", ctypes.POINTER(ctypes.c_char)),
        ("text_length", ctypes.c_size_t),
        ("finished", ctypes.c_int32),
        ("finish_reason", ctypes.c_int),
        ("error", ctypes.c_char_p),
        ("prompt_tokens", ctypes.c_int64),
        ("generated_tokens", ctypes.c_int64),
        ("cached_prompt_tokens", ctypes.c_int64),
    ]


TEXT_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_char), ctypes.c_size_t,
                                 ctypes.c_void_p)


def _find_library():
    explicit = os.environ.get("LLMC_LIBRARY")
    if explicit:
        return explicit
    return ctypes.util.find_library("llmc") or "libllmc.so.0"


def load():
    path = _find_library()
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise OSError(f"cannot load the llmc runtime library '{path}': {e}; set LLMC_LIBRARY to "
                      "the path of libllmc.so (build/runtime/libllmc.so in a build tree)") from e
    P = ctypes.POINTER
    engine_p = ctypes.c_void_p
    decls = {
        "llmc_status_name": (ctypes.c_char_p, [c_status]),
        "llmc_last_error": (ctypes.c_char_p, []),
        "llmc_version": (ctypes.c_char_p, []),
        "llmc_engine_options_init": (None, [P(EngineOptions)]),
        "llmc_engine_open": (c_status, [ctypes.c_char_p, P(EngineOptions), P(engine_p)]),
        "llmc_engine_close": (None, [engine_p]),
        "llmc_engine_model_info": (c_status, [engine_p, P(ModelInfoStruct)]),
        "llmc_tokenize": (c_status, [engine_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int,
                                     P(ctypes.c_int32), ctypes.c_size_t, P(ctypes.c_size_t)]),
        "llmc_detokenize": (c_status, [engine_p, P(ctypes.c_int32), ctypes.c_size_t, ctypes.c_int,
                                       ctypes.c_char_p, ctypes.c_size_t, P(ctypes.c_size_t)]),
        "llmc_sampling_params_init": (None, [P(SamplingParams)]),
        "llmc_generate_params_init": (None, [P(GenerateParams)]),
        "llmc_generate": (c_status, [engine_p, ctypes.c_char_p, ctypes.c_size_t, P(GenerateParams),
                                     TEXT_CALLBACK, ctypes.c_void_p, P(GenerateResultStruct)]),
        "llmc_chat_template_parse": (c_status, [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                                P(ctypes.c_void_p)]),
        "llmc_engine_chat_template": (c_status, [engine_p, ctypes.c_char_p, P(ctypes.c_void_p)]),
        "llmc_chat_template_free": (None, [ctypes.c_void_p]),
        "llmc_chat_render_options_init": (None, [P(ChatRenderOptions)]),
        "llmc_chat_render_json": (c_status, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                             P(ChatRenderOptions), ctypes.c_char_p,
                                             ctypes.c_size_t, P(ctypes.c_size_t)]),
        "llmc_scheduler_options_init": (None, [P(SchedulerOptions)]),
        "llmc_scheduler_create": (c_status, [engine_p, P(SchedulerOptions), P(ctypes.c_void_p)]),
        "llmc_scheduler_destroy": (None, [ctypes.c_void_p]),
        "llmc_request_params_init": (None, [P(RequestParams)]),
        "llmc_scheduler_submit": (c_status, [ctypes.c_void_p, P(RequestParams), ctypes.c_void_p,
                                             ctypes.c_void_p, P(ctypes.c_int64)]),
        "llmc_scheduler_cancel": (c_status, [ctypes.c_void_p, ctypes.c_int64]),
        "llmc_scheduler_step": (c_status, [ctypes.c_void_p, P(ctypes.c_int32)]),
        "llmc_scheduler_poll": (c_status, [ctypes.c_void_p, P(RequestEvent), ctypes.c_size_t,
                                           P(ctypes.c_size_t)]),
    }
    for name, (restype, argtypes) in decls.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib
