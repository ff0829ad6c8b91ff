"""Events the engine emits (plain, picklable dataclasses). They cross from the engine thread to callers."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


@dataclass(frozen=True)
class RequestStats:
    prompt_tokens: int
    cached_prompt_tokens: int
    generated_tokens: int
    ttft_s: float
    decode_tok_s: float
    total_s: float
    num_preemptions: int
    spec_proposed: int = 0  # speculative decoding: drafts verified
    spec_accepted: int = 0  # and of them, accepted

    @classmethod
    def timed(cls, arrival: float, first_token: float | None, end: float, prompt_tokens: int, generated_tokens: int,
              cached_prompt_tokens: int = 0, num_preemptions: int = 0, spec_proposed: int = 0,
              spec_accepted: int = 0) -> RequestStats:
        """From the request's arrival, first token and end (perf_counter seconds; no first token: the end);
        decode speed counts the tokens after the first, every backend alike."""
        first = end if first_token is None else first_token
        decode_tokens = max(generated_tokens - 1, 0)
        return cls(prompt_tokens=prompt_tokens, cached_prompt_tokens=cached_prompt_tokens,
                   generated_tokens=generated_tokens, ttft_s=first - arrival,
                   decode_tok_s=decode_tokens / (end - first) if decode_tokens and end > first else 0.0,
                   total_s=end - arrival, num_preemptions=num_preemptions, spec_proposed=spec_proposed,
                   spec_accepted=spec_accepted)


@dataclass(frozen=True)
class ToolCall:
    """A call the model addressed to a tool (gpt-oss: a harmony message `to=functions.NAME`); `arguments` as written."""

    name: str
    arguments: str


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of the `index`-th tool call of a reply as it is generated: its `name` in the first piece (None
    after), then pieces of its arguments text; the pieces joined, plus what the FinishEvent's call has beyond
    them, are its arguments."""

    index: int
    name: str | None
    arguments: str


@dataclass(frozen=True)
class TokenEvent:
    """One generated token; `text` is the newly completed answer text (may be empty while a character or a
    marker is incomplete); `reasoning` the newly completed reasoning of a reasoning model's chat reply;
    `top_logprobs` the most likely (token id, logprob) alternatives when the request asked for them;
    `tool_call_deltas` what the token adds to the reply's tool calls."""

    request_id: str
    token_id: int
    text: str
    logprob: float
    reasoning: str = ""
    top_logprobs: tuple[tuple[int, float], ...] = ()
    tool_call_deltas: tuple[ToolCallDelta, ...] = ()


class ErrorKind(str, Enum):
    """Whose fault a request's error is, for the edges that report it (the server's HTTP status)."""

    REFUSED = "refused"  # the request cannot be served as given: a prompt beyond the context, a template refusing it
    FAILED = "failed"  # generating it failed: out of memory, a bug, a remote server's failure or broken stream


@dataclass(frozen=True)
class FinishEvent:
    """The request ended: reason is "stop", "length", "cancelled" or "error" (then `error` says why and
    `error_kind` whose fault it is).

    `text` is the answer; for a chat reply of a reasoning model (gpt-oss's harmony channels, `<think>` tags)
    `reasoning` holds its reasoning and `tool_calls` the tool calls it made, apart from the answer."""

    request_id: str
    reason: str
    text: str
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    stats: RequestStats
    error: str | None = None
    reasoning: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    error_kind: ErrorKind | None = None


Event = TokenEvent | FinishEvent


@dataclass(frozen=True)
class EngineStats:
    """A snapshot of the engine for live displays; published by the engine thread after every step."""

    plan: object  # engine.alloc.memory_plan.MemoryPlan
    expert_hits: int
    expert_misses: int
    expert_hit_rate: float
    h2d_bytes: int
    h2d_gb_per_s: float
    decode_tok_s: float
    kv_blocks_used: int
    kv_blocks_total: int
    running: int
    waiting: int
    pending_budget: int | None
    device_peak_bytes: int | None
    wsa_curve: tuple[tuple[float, float], ...] | None = None  # (expert share of the pool, predicted tok/s)
    # The host tier: expert bytes held in host memory (pinned on a GPU) and left memory-mapped in the model file,
    # and the misses served from the mapping (through the page cache) since load.
    host_pinned_bytes: int = 0
    host_mapped_bytes: int = 0
    page_cache_reads: int = 0
    page_cache_bytes: int = 0
    page_cache_gb_per_s: float = 0.0
    # Speculative decoding since load: drafts verified, drafts accepted (their ratio: the acceptance rate), and the
    # expert misses of the verify steps (the union of their positions' experts).
    spec_proposed: int = 0
    spec_accepted: int = 0
    spec_verify_misses: int = 0
