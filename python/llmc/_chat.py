"""Chat templates and the scheduler over the C API (see _capi.py for the declarations)."""

import ctypes
import json
from dataclasses import dataclass, field

from . import _capi
from ._engine import LlmcError, _Closing, _check, _library


class ChatTemplate:
    """A parsed Jinja chat template, rendered as transformers' apply_chat_template renders it.

    ChatTemplate(source, name="chat.jinja") parses a template; Engine.chat_template() gives a
    plan's own, with its special tokens (bos_token, eos_token, ...) bound. Immutable: render it
    from any thread."""

    def __init__(self, source=None, name=None, _handle=None):
        if _handle is not None:
            self._handle = _handle
            return
        lib = _library()
        data = source.encode("utf-8")
        handle = ctypes.c_void_p()
        _check(lib.llmc_chat_template_parse(data, len(data), name.encode() if name else None,
                                            ctypes.byref(handle)), "parsing the chat template")
        self._handle = handle

    def __del__(self):
        if getattr(self, "_handle", None):
            _library().llmc_chat_template_free(self._handle)
            self._handle = None

    def render(self, messages, add_generation_prompt=False, fixed_time=None, **context):
        """The rendered text. `messages`: a list of {"role", "content", ...} dicts (any keys
        reach the template); `context`: extra variables (tools, enable_thinking, bos_token...)
        as apply_chat_template's keyword arguments; `fixed_time`: seconds since the epoch
        that strftime_now() formats instead of the clock."""
        lib = _library()
        messages_json = json.dumps(list(messages), ensure_ascii=False).encode("utf-8")
        options = _capi.ChatRenderOptions()
        lib.llmc_chat_render_options_init(ctypes.byref(options))
        options.add_generation_prompt = int(add_generation_prompt)
        context_json = json.dumps(context, ensure_ascii=False).encode("utf-8")
        if context:
            options.context_json = context_json
            options.context_json_length = len(context_json)
        if fixed_time is not None:
            options.fixed_time = 1
            options.time_seconds = int(fixed_time)
        length = ctypes.c_size_t(0)
        capacity = 4 * len(messages_json) + 256
        while True:
            buffer = ctypes.create_string_buffer(capacity)
            status = lib.llmc_chat_render_json(self._handle, messages_json, len(messages_json),
                                               ctypes.byref(options), buffer, capacity,
                                               ctypes.byref(length))
            if status == _capi.STATUS_BUFFER_TOO_SMALL:
                capacity = length.value + 1
                continue
            _check(status, "rendering the chat template")
            return buffer.raw[:length.value].decode("utf-8")


def engine_chat_template(engine, name=None):
    handle = ctypes.c_void_p()
    _check(_library().llmc_engine_chat_template(engine._live(), name.encode() if name else None,
                                                ctypes.byref(handle)), "the plan's chat template")
    return ChatTemplate(_handle=handle)


@dataclass
class Completion:
    """One scheduler request's outcome."""
    text: str = ""
    tokens: list = field(default_factory=list)
    finish_reason: str = ""  # "stop", "length", "cancelled", "error"
    error: str = ""
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0


class Scheduler(_Closing):
    """The server's serving core over an engine: continuous batching, chunked prefill and
    prefix caching. submit() requests, then run() (or step()) them. While it exists, the
    engine cannot generate by itself; close() gives it back. One thread at a time."""

    def __init__(self, engine, max_num_seqs=256, max_num_batched_tokens=2048,
                 prefix_caching=True):
        lib = _library()
        options = _capi.SchedulerOptions()
        lib.llmc_scheduler_options_init(ctypes.byref(options))
        options.max_num_seqs = max_num_seqs
        options.max_num_batched_tokens = max_num_batched_tokens
        options.prefix_caching = int(prefix_caching)
        handle = ctypes.c_void_p()
        _check(lib.llmc_scheduler_create(engine._live(), ctypes.byref(options),
                                         ctypes.byref(handle)), "creating the scheduler")
        self._engine = engine  # outlives the handle
        self._handle = handle
        engine._schedulers.add(self)
        self.completions = {}

    def close(self):
        if getattr(self, "_handle", None):
            _library().llmc_scheduler_destroy(self._handle)
            self._handle = None

    def submit(self, prompt, max_tokens=16, temperature=0.0, top_k=0, top_p=1.0, min_p=0.0,
               repetition_penalty=1.0, seed=0, stop=(), stop_token_ids=(), min_tokens=0,
               ignore_eos=False, presence_penalty=0.0, frequency_penalty=0.0, add_special=True):
        """Queues a request (prompt: text, or a list of token ids); returns its id."""
        if not self._handle:
            raise LlmcError("the scheduler is closed")
        lib = _library()
        params = _capi.RequestParams()
        lib.llmc_request_params_init(ctypes.byref(params))
        keep = []  # buffers the call reads
        if isinstance(prompt, str):
            data = prompt.encode("utf-8")
            keep.append(data)
            params.prompt, params.prompt_length = data, len(data)
        else:
            ids = (ctypes.c_int32 * len(prompt))(*prompt)
            keep.append(ids)
            params.prompt_ids, params.num_prompt_ids = ids, len(prompt)
        params.add_special = int(add_special)
        s = params.sampling
        s.temperature, s.top_k, s.top_p, s.min_p = temperature, top_k, top_p, min_p
        s.repetition_penalty, s.seed = repetition_penalty, seed
        params.max_tokens, params.min_tokens = max_tokens, min_tokens
        params.ignore_eos = int(ignore_eos)
        if stop_token_ids:
            stop_ids = (ctypes.c_int32 * len(stop_token_ids))(*stop_token_ids)
            keep.append(stop_ids)
            params.stop_token_ids, params.num_stop_token_ids = stop_ids, len(stop_token_ids)
        if stop:
            stop = [stop] if isinstance(stop, str) else list(stop)
            strings = (ctypes.c_char_p * len(stop))(*[x.encode("utf-8") for x in stop])
            keep.append(strings)
            params.stop, params.num_stop = strings, len(stop)
        params.presence_penalty, params.frequency_penalty = presence_penalty, frequency_penalty
        request_id = ctypes.c_int64(0)
        _check(lib.llmc_scheduler_submit(self._handle, ctypes.byref(params), None, None,
                                         ctypes.byref(request_id)), "submit")
        self.completions[request_id.value] = Completion()
        return request_id.value

    def cancel(self, request_id):
        _check(_library().llmc_scheduler_cancel(self._handle, request_id), "cancel")

    def step(self):
        """One iteration; returns the ids of the requests that finished in it."""
        lib = _library()
        has_work = ctypes.c_int32(0)
        _check(lib.llmc_scheduler_step(self._handle, ctypes.byref(has_work)), "step")
        events = (_capi.RequestEvent * 64)()
        count = ctypes.c_size_t(0)
        finished = []
        while True:
            _check(lib.llmc_scheduler_poll(self._handle, events, 64, ctypes.byref(count)), "poll")
            for e in events[:count.value]:
                c = self.completions[e.id]
                c.text += ctypes.string_at(e.text, e.text_length).decode("utf-8")
                if e.token >= 0:
                    c.tokens.append(e.token)
                c.prompt_tokens, c.cached_prompt_tokens = e.prompt_tokens, e.cached_prompt_tokens
                if e.finished:
                    c.finish_reason = _capi.FINISH_REASONS.get(e.finish_reason, "unknown")
                    c.error = e.error.decode("utf-8", "replace") if e.error else ""
                    finished.append(e.id)
            if count.value < 64:
                break
        self._has_work = bool(has_work.value)
        return finished

    def run(self):
        """Steps until every request has finished; returns {id: Completion}."""
        self._has_work = True
        while self._has_work:
            self.step()
        return self.completions
