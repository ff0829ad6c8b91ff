"""A thin layer over llama-cpp-python's low-level (ctypes) API: one model, one context holding one sequence.

The high-level `llama_cpp.Llama` cannot set tensor buffer-type overrides (experts on the CPU), so the model is
loaded through `llama_model_load_from_file` with our own `llama_model_params`. Everything here runs on the
engine thread, except `load`, which runs on whichever thread builds the Engine.
"""

from __future__ import annotations

import ctypes
import logging
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import llama_cpp

from engine.errors import ModelFormatError

logger = logging.getLogger("wisp.llama_cpp")
logger.addHandler(logging.NullHandler())  # llama.cpp's chatter goes to the app's log file, never to stderr
LOG_LEVELS = {1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}  # ggml_log_level; 5 = CONT
TOKEN_ATTR_CONTROL = 1 << 3  # llama_token_attr: LLAMA_TOKEN_ATTR_CONTROL
SEQ_ID = 0


class LlamaLog:
    """llama.cpp's and ggml's log lines go to Python logging instead of stderr; the recent ones are kept for
    error messages (llama.cpp reports why a file failed to load only there)."""

    def __init__(self, keep: int = 20000):
        self.lines: deque[tuple[int, str]] = deque(maxlen=keep)
        self._partial = ""
        self._level = logging.INFO
        self.callback = llama_cpp.llama_log_callback(self._on_log)  # referenced so ctypes does not free it

    def _on_log(self, level: int, text: bytes, _user_data) -> None:
        self._level = LOG_LEVELS.get(level, self._level)  # 5 = GGML_LOG_LEVEL_CONT keeps the previous level
        self._partial += text.decode("utf-8", errors="replace")
        while "\n" in self._partial:
            line, self._partial = self._partial.split("\n", 1)
            self.lines.append((self._level, line))
            logger.log(self._level, "%s", line)

    def mark(self) -> None:
        """Forget earlier lines: what follows belongs to the next load."""
        self.lines.clear()

    def errors(self) -> list[str]:
        return [line.strip() for level, line in self.lines if level >= logging.ERROR and line.strip()]

    def matching(self, text: str) -> list[str]:
        return [line for _, line in self.lines if text in line]


LOG = LlamaLog()
llama_cpp.llama_log_set(LOG.callback, ctypes.c_void_p(0))
llama_cpp.llama_backend_init()


@dataclass(frozen=True)
class ContextSettings:
    n_ctx: int
    n_batch: int = 512
    n_threads: int | None = None  # None: llama.cpp's default (physical cores)


class LlamaCppModel:
    """A loaded GGUF model and a context whose KV cache holds one sequence (`cached` mirrors its tokens)."""

    def __init__(self, path: Path, model_params, settings: ContextSettings):
        LOG.mark()
        self.model = llama_cpp.llama_model_load_from_file(str(path).encode(), model_params)
        if not self.model:
            raise load_error(path)
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.ctx = llama_cpp.llama_init_from_model(self.model, context_params(settings))
        if not self.ctx:
            llama_cpp.llama_model_free(self.model)
            raise ModelFormatError(f"{path}: llama.cpp could not create a context of {settings.n_ctx} tokens: "
                                   + ("; ".join(LOG.errors()[-2:]) or "out of memory?"))
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(self.vocab)
        # llama.cpp rounds the context up (to 256 at least) and caps n_batch at the requested context; decode()
        # must never pass more than n_batch tokens (a GGML_ASSERT would abort the process)
        self.n_ctx = min(settings.n_ctx, llama_cpp.llama_n_ctx(self.ctx))
        self.n_batch = llama_cpp.llama_n_batch(self.ctx)
        self.cached: list[int] = []
        self.keep_alive: object = None  # ctypes objects the model params point to

    # --- tokens ---
    def tokenize(self, text: str, add_special: bool) -> list[int]:
        """Special-token text (e.g. <|im_start|>) is parsed as the special token, as Hugging Face tokenizers do."""
        data = text.encode("utf-8")
        capacity = len(data) + 8
        buffer = (llama_cpp.llama_token * capacity)()
        count = llama_cpp.llama_tokenize(self.vocab, data, len(data), buffer, capacity, add_special, True)
        if count < 0:
            buffer = (llama_cpp.llama_token * -count)()
            count = llama_cpp.llama_tokenize(self.vocab, data, len(data), buffer, -count, add_special, True)
        return list(buffer[:count])

    def detokenize(self, ids: list[int], render_special: bool) -> str:
        """Text of `ids`; an incomplete UTF-8 character at the end decodes as U+FFFD."""
        tokens = (llama_cpp.llama_token * len(ids))(*ids)
        capacity = 16 * len(ids) + 16
        buffer = ctypes.create_string_buffer(capacity)
        size = llama_cpp.llama_detokenize(self.vocab, tokens, len(ids), buffer, capacity, False, render_special)
        if size < 0:
            capacity = -size
            buffer = ctypes.create_string_buffer(capacity)
            size = llama_cpp.llama_detokenize(self.vocab, tokens, len(ids), buffer, capacity, False, render_special)
        return buffer.raw[:size].decode("utf-8", errors="replace")

    def token_text(self, token_id: int) -> str | None:
        if not 0 <= token_id < self.n_vocab:
            return None
        return llama_cpp.llama_vocab_get_text(self.vocab, token_id).decode("utf-8", errors="replace")

    def control_token_ids(self) -> frozenset[int]:
        attr = llama_cpp.llama_vocab_get_attr
        return frozenset(i for i in range(self.n_vocab) if attr(self.vocab, i) & TOKEN_ATTR_CONTROL)

    def is_end_of_generation(self, token_id: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self.vocab, token_id))

    def special_id(self, name: str) -> int | None:
        """bos, eos, eot, pad, ... or None when the vocabulary has none."""
        token_id = getattr(llama_cpp, f"llama_vocab_{name}")(self.vocab)
        return token_id if token_id >= 0 else None

    # --- the sequence in the KV cache ---
    def reuse_prefix(self, prompt: list[int]) -> int:
        """Keep the longest cached prefix of `prompt` (at least one prompt token is left to evaluate, for its
        logits); drop the rest of the cache. Returns how many prompt tokens are cached."""
        shared = 0
        for cached, wanted in zip(self.cached, prompt[:-1]):
            if cached != wanted:
                break
            shared += 1
        if not llama_cpp.llama_memory_seq_rm(self.memory, SEQ_ID, shared, -1):
            llama_cpp.llama_memory_clear(self.memory, True)  # e.g. recurrent state cannot be cut partway
            shared = 0
        self.cached = self.cached[:shared]
        return shared

    def clear(self) -> None:
        llama_cpp.llama_memory_clear(self.memory, True)
        self.cached = []

    def decode(self, tokens: list[int]) -> np.ndarray:
        """Append `tokens` (at most n_batch) to the sequence; -> fp32 logits of the last one [V]."""
        if not 0 < len(tokens) <= self.n_batch or len(self.cached) + len(tokens) > self.n_ctx:
            raise RuntimeError(f"cannot decode {len(tokens)} tokens after {len(self.cached)} (n_batch {self.n_batch}, "
                               f"context {self.n_ctx})")
        array = (llama_cpp.llama_token * len(tokens))(*tokens)
        status = llama_cpp.llama_decode(self.ctx, llama_cpp.llama_batch_get_one(array, len(tokens)))
        if status != 0:
            raise RuntimeError(f"llama_decode returned {status}: " + ("; ".join(LOG.errors()[-2:]) or
                                                                    "the KV cache is full or the step was aborted"))
        self.cached += tokens
        logits = llama_cpp.llama_get_logits_ith(self.ctx, -1)
        return np.ctypeslib.as_array(logits, shape=(self.n_vocab,)).copy()

    def close(self) -> None:
        if self.ctx:
            llama_cpp.llama_free(self.ctx)
            self.ctx = None
        if self.model:
            llama_cpp.llama_model_free(self.model)
            self.model = None


def context_params(settings: ContextSettings):
    params = llama_cpp.llama_context_default_params()
    params.n_ctx = settings.n_ctx
    params.n_batch = params.n_ubatch = settings.n_batch
    params.n_seq_max = 1
    if settings.n_threads:
        params.n_threads = params.n_threads_batch = settings.n_threads
    return params


def load_error(path: Path) -> Exception:
    """llama.cpp says why in its log ("unknown model architecture: 'x'", "tensor ... has wrong shape", ...)."""
    from engine.errors import UnsupportedModelError

    reasons = LOG.errors()
    detail = next((line for line in reasons if "architecture" in line), None)
    if detail:
        return UnsupportedModelError(f"{path}: llama.cpp cannot run this model: {clean(detail)}")
    reason = "; ".join(clean(line) for line in reasons[-2:]) or "no reason given"
    return ModelFormatError(f"{path}: llama.cpp could not load it: {reason}")


def clean(line: str) -> str:
    """Drop llama.cpp's 'function_name: ' prefixes."""
    parts = [part.strip() for part in line.split(": ")]
    while len(parts) > 1 and " " not in parts[0]:
        parts.pop(0)
    return ": ".join(parts)
