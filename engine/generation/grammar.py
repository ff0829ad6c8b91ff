"""Structured output: a JSON schema (or "any JSON object") compiled by llguidance into a matcher that walks
along with one sequence and says, before each token, which tokens keep the output inside the grammar.

llguidance (Rust, one abi3 wheel per platform, no Python dependencies) reads the tokenizer's own tokenizer.json,
so its idea of each token's bytes is the tokenizer's. The mask is computed on the CPU; the engine asks for it
after it has launched the step on the GPU, so the two overlap (engine thread only)."""

from __future__ import annotations

import json

import numpy as np
import torch

from engine.errors import RequestError, WispError
from engine.generation.tool_calls import CLOSE, OPEN, writes_tool_call_tags

# Compact JSON (no whitespace between tokens): a small model left free to write whitespace may write it forever.
COMPACT_JSON = {"whitespace_flexible": False}
NAME_MAPS = ("properties", "patternProperties", "$defs", "definitions")  # name -> schema, not schemas themselves


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

    def for_request(self, request) -> "GrammarMatcher | None":
        """The matcher a GenerateRequest asks for: its JSON schema, or a forced tool call; None for free text."""
        if request.tool_choice is not None:
            return self.tool_call_matcher(request.tools, request.tool_choice)
        if request.sampling.json_schema is not None:
            return self.matcher(request.sampling.json_schema)
        return None

    def matcher(self, schema: str) -> "GrammarMatcher":
        """A fresh matcher for the JSON schema text; RequestError when llguidance cannot compile it."""
        llguidance = import_llguidance()
        try:
            grammar = llguidance.LLMatcher.grammar_from_json_schema(closed_objects(json.loads(schema)),
                                                                   defaults=COMPACT_JSON)
        except ValueError as error:
            raise RequestError(f"the JSON schema is not usable: {error}", "json_schema") from None
        return self._compiled(grammar, "json_schema")

    def tool_call_matcher(self, tools: tuple[dict, ...], choice: str) -> "GrammarMatcher":
        """One `<tool_call>{"name": ..., "arguments": ...}</tool_call>` block whose arguments follow the tool's
        parameters schema (Qwen's and Hermes' form; the model must write it: ModelInfo.tool_calls)."""
        if not writes_tool_call_tags(self.tokenizer):
            raise RequestError("a required or named tool_choice is supported for models that write <tool_call> "
                               "blocks (Qwen, Hermes); leave tool_choice at auto for this one", "tool_choice")
        chosen = [tool["function"] for tool in tools if choice in ("required", tool["function"]["name"])]
        calls = [{"type": "object", "properties": {"name": {"const": f["name"]},
                                                   "arguments": closed_objects(f.get("parameters") or {})},
                  "required": ["name", "arguments"], "additionalProperties": False} for f in chosen]
        schema = {"anyOf": calls} if len(calls) > 1 else calls[0]
        schema["x-guidance"] = COMPACT_JSON
        lark = (f"start: {self._literal(OPEN)} \"\\n\" call \"\\n\" {self._literal(CLOSE)}\n"
                f"call: %json {json.dumps(schema)}")
        return self._compiled(import_llguidance().LLMatcher.grammar_from_lark(lark), "tools")

    def _literal(self, text: str) -> str:
        """A lark reference to `text`: its token when the tokenizer has it as one (an added token), else the text."""
        token_id = self.tokenizer.token_to_id(text)
        return f"<[{token_id}]>" if token_id is not None else json.dumps(text)

    def _compiled(self, grammar: str, field: str) -> "GrammarMatcher":
        llguidance = import_llguidance()
        tokenizer = self.lltokenizer()
        is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(grammar, tokenizer)
        if is_error:
            raise RequestError(f"the JSON schema is not usable: {messages[0]}", field)
        return GrammarMatcher(llguidance.LLMatcher(tokenizer, grammar, log_level=0), tokenizer.vocab_size)


def closed_objects(schema: object) -> object:
    """The schema with additionalProperties false on every object that lists properties and does not say: what
    OpenAI's strict mode asks for, and what keeps a model from inventing keys. Replies still match the schema."""
    if isinstance(schema, list):
        return [closed_objects(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    closed = {key: ({name: closed_objects(item) for name, item in value.items()}
                    if key in NAME_MAPS and isinstance(value, dict) else closed_objects(value))
              for key, value in schema.items()}
    if "properties" in closed and "additionalProperties" not in closed:
        closed["additionalProperties"] = False
    return closed


def import_llguidance():
    try:
        import llguidance
    except ImportError:
        raise grammar_missing() from None
    return llguidance


def build_lltokenizer(tokenizer):
    llguidance = import_llguidance()
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
