"""A remote OpenAI-compatible server (vLLM, llama.cpp's server, another `wisp serve`, ...) as the engine.

MODEL is the server's base URL, e.g. http://gpu-box:8000/v1, optionally with `#model-id` when it serves
several. Every request streams from /v1/chat/completions (messages) or /v1/completions (a prompt or token
ids) on its own worker thread (remote_stream.py), which parses the SSE stream into pieces on one queue; step() (the
engine thread) turns them into TokenEvents and FinishEvents, waiting at most POLL_S for the first, so
that many requests interleave and a cancel is handled within one poll. A cancelled request's worker stops
reading and closes its connection, which the server sees as a disconnect.

With servers that speak the vLLM extensions (Wisp and vLLM) the events carry real token ids and logprobs
(`logprobs` + `return_tokens_as_token_ids`); with others the token id is -1 and the logprob NaN."""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
import queue
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx

from engine.alloc.memory_plan import MemoryPlan
from engine.backends.remote_stream import Piece, StreamWorker
from engine.errors import RequestError, WispError
from engine.experts.counters import ExpertCounters
from engine.events import EngineStats, ErrorKind, Event, FinishEvent, RequestStats, TokenEvent
from engine.requests import GenerateRequest
from engine.generation.core import FixedMemory
from engine.generation.model_info import ModelInfo
from engine.generation.throughput import Throughput
from engine.vision.image_input import with_data_urls

API_KEY_ENV = "WISP_REMOTE_API_KEY"
POLL_S = 0.02
EXTENSION_OWNERS = ("wisp", "vllm")  # servers that accept top_k, ignore_eos, return_tokens_as_token_ids
TIMEOUT = httpx.Timeout(connect=10.0, read=600.0, write=60.0, pool=60.0)
REMOTE_PLAN = MemoryPlan(mode="remote", budget_bytes=None, dense_bytes=0, expert_bytes=0, layer_slots=(),
                         num_moe_layers=0, offloaded_layers=0, static_resident_bytes=0, kv_blocks=0,
                         kv_block_bytes=0, workspace_bytes=0)

_api_key: contextvars.ContextVar[str | None] = contextvars.ContextVar("wisp_remote_api_key", default=None)


class RemoteError(WispError):
    """The remote server cannot be reached, refuses the key, or does not look like an OpenAI API."""


@contextlib.contextmanager
def using_api_key(key: str | None):
    """Remote engines built inside this block (on this thread) send `key`; the CLI's --api-key."""
    token = _api_key.set(key)
    try:
        yield
    finally:
        _api_key.reset(token)


def api_key_for(options) -> str | None:
    return getattr(options, "api_key", None) or _api_key.get() or os.environ.get(API_KEY_ENV) or None


def split_target(target: str) -> tuple[str, str | None]:
    """'http://host:8000/v1#model' -> ('http://host:8000/v1', 'model'); a bare host gets /v1."""
    url, _, model = target.partition("#")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise RemoteError(f"'{target}' is not a server URL; use e.g. http://127.0.0.1:8000/v1")
    url = url.rstrip("/")
    return (url if parts.path.strip("/") else url + "/v1"), (model or None)


def build(target: str, options, progress=None) -> tuple["RemoteCore", ModelInfo]:
    base_url, wanted = split_target(target)
    key = api_key_for(options)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    client = httpx.Client(base_url=base_url, headers=headers, timeout=TIMEOUT,
                          limits=httpx.Limits(max_connections=256, max_keepalive_connections=32))
    try:
        card = pick_model(fetch_models(client, base_url), wanted, base_url)
    except BaseException:
        client.close()
        raise
    if progress is not None:
        progress(1.0, f"connected to {base_url}")
    has_extensions = card.get("owned_by") in EXTENSION_OWNERS
    info = ModelInfo(
        path=target, name=str(card["id"]), model_type="remote", num_layers=0, num_experts=0, top_k=0,
        max_model_len=context_length(card), device=f"remote ({urlsplit(base_url).netloc})",
        dtype="remote", has_chat_template=True, plan=REMOTE_PLAN,
        reasoning_effort=True,  # sent on: the server applies it or not
        thinking_switch=has_extensions)  # sent as chat_template_kwargs, which OpenAI's own API refuses
    return RemoteCore(client, str(card["id"]), has_extensions), info


def fetch_models(client: httpx.Client, base_url: str) -> list[dict]:
    try:
        response = client.get("/models", timeout=10.0)
    except httpx.HTTPError as error:
        raise RemoteError(f"cannot reach {base_url}: {error}; is the server running?") from None
    if response.status_code in (401, 403):
        raise RemoteError(f"{base_url} refused the API key (HTTP {response.status_code}); pass --api-key KEY "
                          f"or set {API_KEY_ENV}")
    if response.status_code != 200:
        raise RemoteError(f"{base_url}/models answered HTTP {response.status_code}; give the OpenAI base URL, "
                          "usually ending in /v1")
    try:
        cards = list(response.json()["data"])
    except (ValueError, KeyError, TypeError, RecursionError):
        raise RemoteError(f"{base_url}/models did not answer an OpenAI model list") from None
    named = [card for card in cards if isinstance(card, dict) and isinstance(card.get("id"), str) and card["id"]]
    if cards and not named:
        raise RemoteError(f"{base_url}/models lists no model with an id; is it an OpenAI-compatible server?")
    return named


def context_length(card: dict) -> int:
    """The card's max_model_len (vLLM and Wisp send it), 0 when absent or not a sane whole number."""
    value = card.get("max_model_len")
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 2**31 else 0


def pick_model(cards: list[dict], wanted: str | None, base_url: str) -> dict:
    names = [str(card.get("id")) for card in cards]
    if wanted is not None:
        if wanted not in names:
            raise RemoteError(f"{base_url} does not serve '{wanted}'; it serves: {', '.join(names) or 'nothing'}")
        return cards[names.index(wanted)]
    if len(cards) != 1:
        raise RemoteError(f"{base_url} serves {len(cards)} models ({', '.join(names)}); pick one with "
                          f"{base_url}#MODEL_ID")
    return cards[0]


def openai_fields(sampling) -> dict:
    """The sampling fields of OpenAI's own API beyond temperature and top_p, where set."""
    body = {name: getattr(sampling, name) for name in ("presence_penalty", "frequency_penalty")
            if getattr(sampling, name)}
    if sampling.logit_bias:
        body["logit_bias"] = {str(token_id): bias for token_id, bias in sampling.logit_bias}
    if sampling.json_schema is not None:
        schema = json.loads(sampling.json_schema)
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "output", "schema": schema}}
    return body


def extension_fields(sampling) -> dict:
    """vLLM's (and Wisp's) sampling extensions, where set."""
    fields = {"top_k": sampling.top_k, "min_p": sampling.min_p, "ignore_eos": sampling.ignore_eos,
              "repetition_penalty": sampling.repetition_penalty if sampling.repetition_penalty != 1.0 else 0}
    return {name: value for name, value in fields.items() if value}


def request_body(request: GenerateRequest, model_id: str, has_extensions: bool) -> tuple[str, dict]:
    """-> (endpoint path, JSON body) of a streamed request."""
    sampling = request.sampling
    body = {"model": model_id, "stream": True, "stream_options": {"include_usage": True},
            "max_tokens": sampling.max_tokens, "temperature": sampling.temperature, "top_p": sampling.top_p}
    if sampling.seed is not None:
        body["seed"] = sampling.seed
    if sampling.stop:
        body["stop"] = list(sampling.stop)
    body.update(openai_fields(sampling))
    if has_extensions:
        body["return_tokens_as_token_ids"] = True
        body.update(extension_fields(sampling))
    elif extension_fields(sampling):
        raise RequestError("this remote server does not take top_k, min_p, repetition_penalty or ignore_eos; "
                           "leave them unset")
    if sampling.top_logprobs:
        raise RequestError("top_logprobs are not passed on to remote servers; call the server itself")
    if request.messages is not None:
        if request.tools:
            raise RequestError("tools are not sent on to remote servers; call the server itself")
        if request.reasoning_effort is not None:
            body["reasoning_effort"] = request.reasoning_effort
        if request.enable_thinking is not None and not has_extensions:
            raise RequestError("this remote server does not take chat_template_kwargs; leave thinking at its default")
        if request.enable_thinking is not None:
            body["chat_template_kwargs"] = {"enable_thinking": request.enable_thinking}
        return "/chat/completions", {**body, "messages": with_data_urls(request.messages), "logprobs": has_extensions}
    prompt = request.prompt if request.prompt is not None else list(request.prompt_token_ids)
    return "/completions", {**body, "prompt": prompt, **({"logprobs": 0} if has_extensions else {})}


@dataclass
class Active:
    request: GenerateRequest
    worker: StreamWorker
    arrival: float = field(default_factory=time.perf_counter)
    first_token_time: float | None = None
    parts: list[str] = field(default_factory=list)
    reasoning_parts: list[str] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)


class RemoteCore:
    """The EngineCore of a remote server; only api.Engine's engine thread calls it."""

    def __init__(self, client: httpx.Client, model_id: str, has_extensions: bool):
        self.client, self.model_id, self.has_extensions = client, model_id, has_extensions
        self.pieces: queue.Queue[Piece] = queue.Queue()
        self.active: dict[str, Active] = {}
        self.throughput = Throughput()
        self.memory = FixedMemory(REMOTE_PLAN, refusal=None)  # the server's device is not ours to plan

    @property
    def has_work(self) -> bool:
        return bool(self.active)

    def add(self, request: GenerateRequest) -> None:
        path, body = request_body(request, self.model_id, self.has_extensions)
        worker = StreamWorker(self.client, request.request_id, path, body, self.pieces)
        self.active[request.request_id] = Active(request, worker)
        worker.thread.start()

    def step(self) -> list[Event]:
        try:
            piece = self.pieces.get(timeout=POLL_S)
        except queue.Empty:
            return []
        events: list[Event] = []
        while piece is not None:
            events.extend(self.apply(piece))
            try:
                piece = self.pieces.get_nowait()
            except queue.Empty:
                piece = None
        num_tokens = sum(isinstance(event, TokenEvent) for event in events)
        if num_tokens:
            self.throughput.record(time.perf_counter(), num_tokens, is_prefill=False)
        return events

    def apply(self, piece: Piece) -> list[Event]:
        active = self.active.get(piece.request_id)
        if active is None:  # cancelled while its worker was still reading
            return []
        if piece.kind == "token":
            active.first_token_time = active.first_token_time or time.perf_counter()
            active.parts.append(piece.text)
            active.reasoning_parts.append(piece.reasoning)
            active.token_ids.append(piece.token_id)
            active.logprobs.append(piece.logprob)
            return [TokenEvent(piece.request_id, piece.token_id, piece.text, piece.logprob, piece.reasoning)]
        if piece.kind == "tail":
            active.parts.append(piece.text)
            active.reasoning_parts.append(piece.reasoning)
            return []
        if piece.kind == "error":
            return [self.finish(active, "error", error=piece.text, error_kind=piece.error_kind)]
        return [self.finish(active, piece.reason, piece.usage)]

    def finish(self, active: Active, reason: str, usage: dict | None = None, error: str | None = None,
               error_kind: ErrorKind = ErrorKind.FAILED) -> FinishEvent:
        del self.active[active.request.request_id]
        usage = usage or {}
        generated = int(usage.get("completion_tokens") or len(active.token_ids))
        stats = RequestStats.timed(active.arrival, active.first_token_time, time.perf_counter(),
                                   int(usage.get("prompt_tokens") or 0), generated)
        return FinishEvent(active.request.request_id, reason, "".join(active.parts), tuple(active.token_ids),
                           tuple(active.logprobs), stats, error=error, reasoning="".join(active.reasoning_parts),
                           error_kind=error_kind if error is not None else None)

    def cancel(self, request_id: str) -> list[Event]:
        active = self.active.get(request_id)
        if active is None:
            return []
        active.worker.is_cancelled = True  # the worker stops at its next line and closes the connection
        return [self.finish(active, "cancelled")]

    def fail_all(self, message: str) -> list[Event]:
        events = []
        for active in list(self.active.values()):
            active.worker.is_cancelled = True
            events.append(self.finish(active, "error", error=message))
        return events

    def expert_counters(self) -> ExpertCounters:
        """Zeros: the server does not report expert traffic."""
        return ExpertCounters()

    def stats(self) -> EngineStats:
        self.throughput.prune()
        return EngineStats(plan=REMOTE_PLAN, expert_hits=0, expert_misses=0, expert_hit_rate=0.0, h2d_bytes=0,
                           h2d_gb_per_s=0.0, decode_tok_s=self.throughput.decode_tok_s, kv_blocks_used=0,
                           kv_blocks_total=0, running=len(self.active), waiting=0, pending_budget=None,
                           device_peak_bytes=None)

    def close(self) -> None:
        for active in self.active.values():
            active.worker.is_cancelled = True
        self.client.close()
