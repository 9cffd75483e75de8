"""ctypes declarations of include/llmc/llmc.h, kept in the header's order."""

import ctypes
import ctypes.util
import os

c_status = ctypes.c_int
STATUS_OK = 0
STATUS_BUFFER_TOO_SMALL = 3
FINISH_REASONS = {0: "stop", 1: "length", 2: "cancelled"}


class EngineOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("device", ctypes.c_char_p),
        ("threads", ctypes.c_int32),
        ("kv_cache_tokens", ctypes.c_int64),
        ("max_sequences", ctypes.c_int64),
        ("gpu_memory_fraction", ctypes.c_double),
        ("verify_weights", ctypes.c_int32),
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
    }
    for name, (restype, argtypes) in decls.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib
