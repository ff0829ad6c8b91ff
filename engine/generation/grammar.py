"""Structured output: a JSON schema (or "any JSON object") compiled by llguidance into a matcher that walks
along with one sequence and says, before each token, which tokens keep the output inside the grammar.

llguidance (Rust, one abi3 wheel per platform, no Python dependencies) reads the tokenizer's own tokenizer.json,
so its idea of each token's bytes is the tokenizer's. The mask is computed on the CPU; the engine asks for it
after it has launched the step on the GPU, so the two overlap (engine thread only)."""

from __future__ import annotations

import numpy as np
import torch

from engine.errors import RequestError, WispError

ANY_JSON_OBJECT = '{"type": "object"}'
# Compact JSON (no whitespace between tokens): a small model left free to write whitespace may write it forever.
COMPACT_JSON = {"whitespace_flexible": False}


def grammar_missing() -> WispError:
    return WispError("structured output needs llguidance: pip install llguidance")


class GrammarCompiler:
    """Builds matchers for one tokenizer; the tokenizer's llguidance form is built once, on first use (~0.1-1 s)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self._lltokenizer = None

    def lltokenizer(self):
        if self._lltokenizer is None:
            self._lltokenizer = build_lltokenizer(self.tokenizer)
        return self._lltokenizer

    def matcher(self, schema: str) -> "GrammarMatcher":
        """A fresh matcher for the JSON schema text; RequestError when llguidance cannot compile it."""
        try:
            import llguidance
        except ImportError:
            raise grammar_missing() from None
        try:
            grammar = llguidance.LLMatcher.grammar_from_json_schema(schema, defaults=COMPACT_JSON)
        except ValueError as error:
            raise RequestError(f"the JSON schema is not usable: {error}", "json_schema") from None
        is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar, self.lltokenizer())
        if is_error:
            raise RequestError(f"the JSON schema is not usable: {messages[0]}", "json_schema")
        tokenizer = self.lltokenizer()
        return GrammarMatcher(llguidance.LLMatcher(tokenizer, grammar, log_level=0), tokenizer.vocab_size)


def build_lltokenizer(tokenizer):
    try:
        import llguidance
    except ImportError:
        raise grammar_missing() from None
    to_json = getattr(tokenizer, "to_json", None)
    if to_json is None:
        raise RequestError("structured output needs a Hugging Face tokenizer (tokenizer.json); this model's "
                           "backend has none: run it on Wisp's engine (--backend wisp)", "response_format")
    eos = sorted(tokenizer.eos_token_ids) or None
    return llguidance.LLTokenizer(to_json(), n_vocab=tokenizer.vocab_size, eos_token=eos)


class GrammarMatcher:
    """One sequence's place in its grammar."""

    def __init__(self, matcher, vocab_size: int):
        self._matcher, self.vocab_size = matcher, vocab_size
        self._bitmask = np.zeros((vocab_size + 31) // 32, dtype=np.int32)

    def allowed(self, width: int, device: torch.device) -> torch.Tensor:
        """bool [width]: the tokens that keep the output in the grammar (EOS once it is complete)."""
        self._matcher.unsafe_compute_mask_ptr(self._bitmask.ctypes.data, self._bitmask.nbytes)
        bits = np.unpackbits(self._bitmask.view(np.uint8), bitorder="little")[:width].astype(bool)
        if len(bits) < width:  # the model's logits may be wider than the tokenizer's vocabulary
            bits = np.concatenate([bits, np.zeros(width - len(bits), dtype=bool)])
        return torch.from_numpy(bits).to(device)

    def accept(self, token_id: int) -> None:
        """Advance past the chosen token. A token the mask did not allow puts the matcher in its error state,
        which counts as complete: the request ends instead of failing the batch's step."""
        self._matcher.consume_token(token_id)

    @property
    def is_complete(self) -> bool:
        """The output is a whole value of the grammar and nothing more can follow but EOS."""
        return self._matcher.is_stopped()
