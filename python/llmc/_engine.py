"""The Engine class over the C API (see _capi.py for the declarations)."""

import ctypes
import queue
import threading
import weakref
from dataclasses import dataclass

from . import _capi

_lib = None


def _library():
    global _lib
    if _lib is None:
        _lib = _capi.load()
    return _lib


class _Closing:
    """A handle owner usable in `with`; close() runs at exit and when collected."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


class LlmcError(RuntimeError):
    """A failed llmc call; the message is the library's (it names the file, field or value)."""


def _check(status, what):
    if status != _capi.STATUS_OK:
        lib = _library()
        message = lib.llmc_last_error().decode("utf-8", "replace")
        raise LlmcError(f"{what}: {message} ({lib.llmc_status_name(status).decode()})")


def library_version():
    return _library().llmc_version().decode()


@dataclass(frozen=True)
class ModelInfo:
    architecture: str
    backend: str
    vocab_size: int
    max_seq_len: int
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    bos_id: int  # -1: none
    eos_id: int  # -1: none
    synthetic: bool


@dataclass(frozen=True)
class GenerateResult:
    text: str
    prompt_tokens: int
    generated_tokens: int
    finish_reason: str  # "stop", "length" or "cancelled"
    prefill_seconds: float
    decode_seconds: float


class Engine(_Closing):
    """A loaded engine plan. Use from one thread at a time."""

    def __init__(self, plan, device="auto", threads=0, kv_cache_tokens=0, max_sequences=1,
                 gpu_memory_fraction=0.9, verify_weights=True, kv_cache_dtype="auto"):
        lib = _library()
        options = _capi.EngineOptions()
        lib.llmc_engine_options_init(ctypes.byref(options))
        self._device = device.encode()  # kept alive while the call reads it
        options.device = self._device
        self._kv_cache_dtype = kv_cache_dtype.encode()
        options.kv_cache_dtype = self._kv_cache_dtype
        options.threads = threads
        options.kv_cache_tokens = kv_cache_tokens
        options.max_sequences = max_sequences
        options.gpu_memory_fraction = gpu_memory_fraction
        options.verify_weights = 1 if verify_weights else 0
        self._schedulers = weakref.WeakSet()  # closed before the engine
        handle = ctypes.c_void_p()
        _check(lib.llmc_engine_open(str(plan).encode(), ctypes.byref(options),
                                    ctypes.byref(handle)), f"opening {plan}")
        self._handle = handle
        raw = _capi.ModelInfoStruct()
        _check(lib.llmc_engine_model_info(self._handle, ctypes.byref(raw)), "model info")
        self.info = ModelInfo(raw.architecture.decode(), raw.backend.decode(), raw.vocab_size,
                              raw.max_seq_len, raw.num_layers, raw.hidden_size, raw.num_heads,
                              raw.num_kv_heads, raw.head_dim, raw.bos_id, raw.eos_id,
                              bool(raw.synthetic))

    def close(self):
        for scheduler in list(getattr(self, "_schedulers", ())):
            scheduler.close()
        if getattr(self, "_handle", None):
            _library().llmc_engine_close(self._handle)
            self._handle = None

    def _live(self):
        if not self._handle:
            raise LlmcError("the engine is closed")
        return self._handle

    def chat_template(self, name=None):
        """The plan's chat template `name` (None: the model's default) as a ChatTemplate, with
        the plan's special tokens bound; LlmcError when the plan has none."""
        from ._chat import engine_chat_template
        return engine_chat_template(self, name)

    def apply_chat_template(self, messages, add_generation_prompt=True, **context):
        """The plan's default template rendered over `messages` (see ChatTemplate.render)."""
        return self.chat_template().render(messages, add_generation_prompt, **context)

    def tokenize(self, text, add_special=True):
        lib = _library()
        data = text.encode("utf-8")
        count = ctypes.c_size_t(0)
        capacity = len(data) + 8
        while True:
            ids = (ctypes.c_int32 * capacity)()
            status = lib.llmc_tokenize(self._live(), data, len(data), int(add_special), ids,
                                       capacity, ctypes.byref(count))
            if status == _capi.STATUS_BUFFER_TOO_SMALL:
                capacity = count.value
                continue
            _check(status, "tokenize")
            return list(ids[:count.value])

    def detokenize(self, ids, skip_special=False):
        lib = _library()
        array = (ctypes.c_int32 * len(ids))(*ids)
        length = ctypes.c_size_t(0)
        capacity = 16 * len(ids) + 16
        while True:
            buffer = ctypes.create_string_buffer(capacity)
            status = lib.llmc_detokenize(self._live(), array, len(ids), int(skip_special), buffer,
                                         capacity, ctypes.byref(length))
            if status == _capi.STATUS_BUFFER_TOO_SMALL:
                capacity = length.value + 1
                continue
            _check(status, "detokenize")
            return buffer.raw[:length.value].decode("utf-8")

    def _params(self, max_tokens, temperature, top_k, top_p, min_p, repetition_penalty, seed,
                ignore_eos, add_special):
        params = _capi.GenerateParams()
        _library().llmc_generate_params_init(ctypes.byref(params))
        params.max_new_tokens = max_tokens
        params.add_special = int(add_special)
        params.ignore_eos = int(ignore_eos)
        s = params.sampling
        s.temperature, s.top_k, s.top_p, s.min_p = temperature, top_k, top_p, min_p
        s.repetition_penalty, s.seed = repetition_penalty, seed
        return params

    def _run(self, prompt, params, on_piece):
        """Generates with on_piece(str) -> bool (True stops) called per piece."""
        lib = _library()
        data = prompt.encode("utf-8")
        errors = []

        def callback(piece, length, _user):
            try:
                return 1 if on_piece(ctypes.string_at(piece, length).decode("utf-8")) else 0
            except BaseException as e:  # never let Python errors unwind through C
                errors.append(e)
                return 1

        c_callback = _capi.TEXT_CALLBACK(callback)
        result = _capi.GenerateResultStruct()
        status = lib.llmc_generate(self._live(), data, len(data), ctypes.byref(params), c_callback,
                                   None, ctypes.byref(result))
        if errors:
            raise errors[0]
        _check(status, "generate")
        return result

    def generate(self, prompt, max_tokens=128, temperature=0.0, top_k=0, top_p=1.0, min_p=0.0,
                 repetition_penalty=1.0, seed=0, ignore_eos=False, add_special=True,
                 return_result=False):
        """The generated text (without the prompt); with return_result, a GenerateResult."""
        params = self._params(max_tokens, temperature, top_k, top_p, min_p, repetition_penalty,
                              seed, ignore_eos, add_special)
        pieces = []
        result = self._run(prompt, params, lambda piece: pieces.append(piece) and False)
        text = "".join(pieces)
        if not return_result:
            return text
        return GenerateResult(text, result.prompt_tokens, result.generated_tokens,
                              _capi.FINISH_REASONS.get(result.finish_reason, "unknown"),
                              result.prefill_seconds, result.decode_seconds)

    def stream(self, prompt, max_tokens=128, temperature=0.0, top_k=0, top_p=1.0, min_p=0.0,
               repetition_penalty=1.0, seed=0, ignore_eos=False, add_special=True):
        """Yields the text piece by piece as it is generated. Leaving the loop early stops
        the generation at its next token."""
        params = self._params(max_tokens, temperature, top_k, top_p, min_p, repetition_penalty,
                              seed, ignore_eos, add_special)
        pieces = queue.Queue()
        stop = threading.Event()
        done = object()
        failure = []

        def worker():
            try:
                self._run(prompt, params, lambda piece: pieces.put(piece) or stop.is_set())
            except BaseException as e:
                failure.append(e)
            finally:
                pieces.put(done)

        thread = threading.Thread(target=worker, daemon=True)
        thread.start()
        try:
            while True:
                piece = pieces.get()
                if piece is done:
                    break
                yield piece
        finally:
            stop.set()
            thread.join()
        if failure:
            raise failure[0]
