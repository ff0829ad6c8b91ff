"""The EngineCore of a GGUF model on llama.cpp: the contract of engine/generation/core.py, emitting the same
TokenEvents and FinishEvents as Wisp's own engine.

Requests run one at a time, first come first served (the llama.cpp context holds one sequence); a chat's next
turn reuses the KV cache of the prefix it shares with the previous request. A long prompt is evaluated one
batch (n_batch tokens) per step, so a cancel waits at most one batch. Sampling is Wisp's own sampler on
llama.cpp's fp32 logits: greedy is the argmax, and a seed draws what Wisp's engine draws on the CPU for equal
logits. Engine thread only.
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from dataclasses import dataclass, field

import torch

from engine.alloc.memory_plan import MemoryPlan
from engine.errors import RequestError
from engine.backends.gguf_placement import KV_BLOCK_TOKENS
from engine.backends.gguf_tokenizer import GgufTokenizer
from engine.backends.llama_cpp_model import LlamaCppModel
from engine.experts.counters import ExpertCounters
from engine.events import EngineStats, Event, FinishEvent
from engine.requests import GenerateRequest
from engine.generation.core import FixedMemory
from engine.generation.prompt import prompt_token_ids
from engine.generation.logits_processors import RowContext, check_token_ids_in_vocabulary, process_row, top_alternatives
from engine.generation.request_state import RequestState
from engine.generation.sampler import sample_row
from engine.generation.text_stream import TextStream
from engine.generation.throughput import Throughput
from engine.sampling import SamplingParams
from engine.vision.image_input import refuse_images

BUDGET_REFUSAL = ("llama.cpp places a GGUF model when it loads it: reload it with other --n-gpu-layers / "
                  "--n-cpu-moe to change its memory")


@dataclass
class GgufRequest:
    prompt: list[int]
    state: RequestState
    pending: list[int] = field(default_factory=list)  # prompt tokens not yet in the KV cache

    @property
    def request_id(self) -> str:
        return self.state.request_id


class LlamaCppCore:
    """The EngineCore of a GGUF model (engine thread only)."""

    def __init__(self, model: LlamaCppModel, tokenizer: GgufTokenizer, plan: MemoryPlan, max_model_len: int):
        self.model, self.tokenizer, self.plan = model, tokenizer, plan
        self.max_model_len = max_model_len
        self.waiting: deque[GgufRequest] = deque()
        self.running: GgufRequest | None = None
        self.throughput = Throughput()
        self.memory = FixedMemory(plan, BUDGET_REFUSAL)  # llama.cpp places the model (n_gpu_layers, n_cpu_moe) once

    # --- the EngineCore contract ---
    def add(self, request: GenerateRequest) -> None:
        check_token_ids_in_vocabulary(request.sampling, self.tokenizer.vocab_size)
        if request.sampling.json_schema is not None or request.tool_choice is not None:
            raise RequestError("structured output (a JSON schema, a forced tool call) runs on Wisp's engine, not on "
                               "llama.cpp: load the .gguf file with --backend wisp (or the app's GGUF engine "
                               "setting)", "response_format")
        refuse_images(request.messages, "llama.cpp")
        prompt = self.prompt_ids(request)
        seed = request.sampling.seed if request.sampling.seed is not None else int.from_bytes(os.urandom(8), "little")
        stream = TextStream.for_request(self.tokenizer, request, prompt)
        generator = torch.Generator().manual_seed(seed)
        state = RequestState(request.request_id, request.sampling, len(prompt), stream, generator)
        self.waiting.append(GgufRequest(prompt, state))

    def step(self) -> list[Event]:
        if self.running is None and not self._start_next():
            return []
        active = self.running
        if active.pending:
            batch, active.pending = active.pending[:self.model.n_batch], active.pending[self.model.n_batch:]
            logits = self.model.decode(batch)
            if active.pending:
                return []  # more of the prompt to evaluate next step
        else:
            logits = self.model.decode(active.state.output_ids[-1:])
        return self._accept_alone(active, logits)

    def cancel(self, request_id: str) -> list[Event]:
        for queued in self.waiting:
            if queued.request_id == request_id:
                self.waiting.remove(queued)
                return [self._finish(queued, "cancelled")]
        if self.running is not None and self.running.request_id == request_id:
            return [self._finish(self.running, "cancelled")]
        return []

    def fail_all(self, message: str) -> list[Event]:
        everyone = ([self.running] if self.running else []) + list(self.waiting)
        self.waiting.clear()
        self.model.clear()  # the failed step may have left the KV cache half-written
        return [self._finish(r, "error", error=message) for r in everyone]

    @property
    def has_work(self) -> bool:
        return self.running is not None or bool(self.waiting)

    def stats(self) -> EngineStats:
        self.throughput.prune()
        kv_blocks_used = math.ceil(len(self.model.cached) / KV_BLOCK_TOKENS)
        return EngineStats(
            plan=self.plan, expert_hits=0, expert_misses=0, expert_hit_rate=0.0, h2d_bytes=0, h2d_gb_per_s=0.0,
            decode_tok_s=self.throughput.decode_tok_s, kv_blocks_used=kv_blocks_used,
            kv_blocks_total=self.plan.kv_blocks, running=int(self.running is not None), waiting=len(self.waiting),
            pending_budget=None, device_peak_bytes=None,
        )

    def expert_counters(self) -> ExpertCounters:
        """Zeros: llama.cpp places experts itself and reports no traffic."""
        return ExpertCounters()

    def close(self) -> None:
        self.model.close()

    # --- internals ---
    def prompt_ids(self, request: GenerateRequest) -> list[int]:
        return prompt_token_ids(request, self.tokenizer, self.max_model_len)

    def _start_next(self) -> bool:
        if not self.waiting:
            return False
        active = self.running = self.waiting.popleft()
        active.state.cached_prompt_tokens = self.model.reuse_prefix(active.prompt)
        active.pending = active.prompt[active.state.cached_prompt_tokens:]
        return True

    def _accept_alone(self, active: GgufRequest, logits) -> list[Event]:
        """A failure in this request's sampling or text handling ends it alone; the waiting ones still run."""
        try:
            return self._accept(active, logits)
        except Exception as err:  # noqa: BLE001 - NaN scores, this request's stop strings or parsers
            return [self._finish(active, "error", error=f"generation failed: {type(err).__name__}: {err}")]

    def _accept(self, active: GgufRequest, logits) -> list[Event]:
        state = active.state
        logits = torch.from_numpy(logits)
        context = RowContext(active.prompt + state.output_ids, len(active.prompt)) if state.sampling.changes_logits else None
        token, logprob = sample(logits, state.sampling, state.generator, context)
        top = top_alternatives(logits[None], [state.sampling])[0]
        now = time.perf_counter()
        self.throughput.record(now, 1, is_prefill=state.first_token_time is None)
        event, reason = state.accept(token, logprob, now, is_end_token=self.model.is_end_of_generation(token),
                                     max_model_len=self.max_model_len, top=top)
        return [event, self._finish(active, reason)] if reason else [event]

    def _finish(self, active: GgufRequest, reason: str, error: str | None = None) -> FinishEvent:
        if active is self.running:
            self.running = None
        return active.state.finish(reason, error=error)


def sample(logits: torch.Tensor, params: SamplingParams, generator: torch.Generator,
           context: RowContext | None = None) -> tuple[int, float]:
    """logits [V] fp32 -> (token, its log-probability under the unmodified distribution), as engine.generation.sampler."""
    row = logits if context is None else process_row(logits, params, context)
    token = int(torch.argmax(row)) if params.is_greedy else int(sample_row(row, params, generator)[0])
    return token, float(torch.log_softmax(logits, dim=-1)[token])
