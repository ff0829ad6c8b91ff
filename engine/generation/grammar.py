"""Structured output: a JSON schema (or "any JSON object") compiled by llguidance into a matcher that walks
along with one sequence and says, before each token, which tokens keep the output inside the grammar.

llguidance (Rust, one abi3 wheel per platform, no Python dependencies) reads the tokenizer's own tokenizer.json,
so its idea of each token's bytes is the tokenizer's. The mask is computed on the CPU; the engine asks for it
after it has launched the step on the GPU, so the two overlap (engine thread only)."""

from __future__ import annotations

import json
from collections import OrderedDict

import numpy as np
import torch

from engine.errors import RequestError, WispError
from engine.generation.compiled_grammars import CompileBudget, CompiledGrammars
from engine.generation.schema_refs import check_ref_cycles, moved_under
from engine.sampling_checks import check_nesting
from engine.generation.tool_calls import CLOSE, OPEN, writes_tool_call_tags

# Compact JSON (no whitespace between tokens): a small model left free to write whitespace may write it forever.
COMPACT_JSON = {"whitespace_flexible": False}
MAX_PREPARED = 1024  # compiled grammars held for requests on their way to the engine thread
NAME_MAPS = ("properties", "patternProperties", "$defs", "definitions")  # name -> schema, not schemas themselves


def grammar_missing() -> WispError:
    return WispError("structured output needs llguidance: pip install llguidance")


class GrammarCompiler:
    """Builds matchers for one tokenizer; the tokenizer's llguidance form is built once, on first use (~0.1-1 s).
    Grammars are compiled by engine.generation.compiled_grammars (worker threads, a cache keyed by the grammar);
    `prepare` (any thread, before the request is queued) waits for that, so `for_request` on the engine thread
    only copies a compiled matcher."""

    def __init__(self, tokenizer, budget: CompileBudget = CompileBudget()):
        self.tokenizer = tokenizer
        self._lltokenizer = None
        self._compiled = CompiledGrammars(self._compile, budget)
        self._prepared: OrderedDict[str, object] = OrderedDict()  # request id -> its compiled grammar

    def lltokenizer(self):
        if self._lltokenizer is None:
            self._lltokenizer = build_lltokenizer(self.tokenizer)
        return self._lltokenizer

    def prepare(self, request) -> None:
        """Compile the request's grammar off the engine thread (the tokenizer thread); RequestError (the request
        alone fails) for an unusable grammar, or one over the time or size budget."""
        grammar = self.grammar_for(request)
        if grammar is not None:
            self._prepared[request.request_id] = self._compiled.get(*grammar)
            while len(self._prepared) > MAX_PREPARED:  # requests cancelled before they were admitted
                self._prepared.popitem(last=False)

    def for_request(self, request) -> "GrammarMatcher | None":
        """The matcher a GenerateRequest asks for: its JSON schema, or a forced tool call; None for free text.
        Engine thread: a prepared request's compiled grammar is only copied; one that was not prepared is compiled
        (on a worker) while this thread waits."""
        compiled = self._prepared.pop(request.request_id, None)
        if compiled is None:
            grammar = self.grammar_for(request)
            if grammar is None:
                return None
            compiled = self._compiled.get(*grammar)
        return GrammarMatcher(compiled.deep_copy(), self.tokenizer.vocab_size)

    def grammar_for(self, request) -> tuple[str, str] | None:
        """(what the grammar is built from, as text, the request field it comes from), or None for free text:
        the compiled grammars' cache key, cheap to make; the grammar itself is built on a worker."""
        if request.tool_choice is not None:
            return json.dumps([request.tools, request.tool_choice, request.parallel_tool_calls]), "tools"
        if request.sampling.json_schema is not None:
            return request.sampling.json_schema, "json_schema"
        return None

    def tool_call_grammar(self, tools: tuple[dict, ...], choice: str, is_parallel: bool = True) -> str:
        """`<tool_call>{"name": ..., "arguments": ...}</tool_call>` blocks whose arguments follow the tool's
        parameters schema (Qwen's and Hermes' form; the model must write it: ModelInfo.tool_calls): one for a
        named tool or without parallel calls, one or more for "required". Each tool's parameters sit under
        `$defs` with their own `$ref`s re-rooted, so pydantic's `#/$defs/Model` still resolves."""
        if not writes_tool_call_tags(self.tokenizer):
            raise RequestError("a required or named tool_choice is supported for models that write <tool_call> "
                               "blocks (Qwen, Hermes); leave tool_choice at auto for this one", "tool_choice")
        chosen = [tool["function"] for tool in tools if choice in ("required", tool["function"]["name"])]
        definitions = {f"tool{index}": moved_under(closed_objects(f.get("parameters") or {}), f"tool{index}")
                       for index, f in enumerate(chosen)}
        for parameters in definitions.values():
            check_nesting(parameters, "tools")
        calls = [{"type": "object", "properties": {"name": {"const": f["name"]},
                                                   "arguments": {"$ref": f"#/$defs/tool{index}"}},
                  "required": ["name", "arguments"], "additionalProperties": False}
                 for index, f in enumerate(chosen)]
        schema = {"anyOf": calls} if len(calls) > 1 else calls[0]
        schema = {**schema, "$defs": definitions, "x-guidance": COMPACT_JSON}
        check_ref_cycles(schema, "tools")
        block = f'{self._literal(OPEN)} "\\n" call "\\n" {self._literal(CLOSE)}'
        repeat = ' ("\\n" block)*' if choice == "required" and is_parallel else ""
        return f"start: block{repeat}\nblock: {block}\ncall: %json {json.dumps(schema)}"

    def _literal(self, text: str) -> str:
        """A lark reference to `text`: its token when the tokenizer has it as one (an added token), else the text."""
        token_id = self.tokenizer.token_to_id(text)
        return f"<[{token_id}]>" if token_id is not None else json.dumps(text)

    def _compile(self, source: str, field: str):
        """grammar_for()'s text -> a compiled llguidance matcher at the start of its grammar (a worker thread)."""
        if field == "tools":
            grammar = self.tool_call_grammar(*json.loads(source))
        else:
            grammar = json_schema_grammar(source)
        matcher = import_llguidance().LLMatcher(self.lltokenizer(), grammar, log_level=0)  # releases the GIL
        if matcher.is_error():
            raise RequestError(f"the JSON schema is not usable: {matcher.get_error()}", field)
        return matcher


def json_schema_grammar(schema: str) -> str:
    """The JSON schema text as an llguidance grammar (compact JSON, objects closed); RequestError when the
    schema nests too deep or refers to itself without nesting."""
    value = json.loads(schema)
    check_nesting(value, "json_schema")
    check_ref_cycles(value, "json_schema")
    try:
        return import_llguidance().LLMatcher.grammar_from_json_schema(closed_objects(value), defaults=COMPACT_JSON)
    except ValueError as error:
        raise RequestError(f"the JSON schema is not usable: {error}", "json_schema") from None


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
