"""The synchronous engine loop: admit requests, step the scheduler, run the model, sample, stream events.
Runs on whichever single thread owns torch (api.Engine's engine thread)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import torch

from engine.alloc.memory_plan import MemoryPlan
from engine.alloc.online_controller import predicted_curve
from engine.errors import PromptTooLongError
from engine.events import Event, FinishEvent, RequestStats, TokenEvent
from engine.generation.plan_event import PlanEvent
from engine.generation.prompt import prompt_token_ids
from engine.generation.sampler import FAILED_TOKEN, sample
from engine.generation.text_stream import TextStream
from engine.generation.throughput import Throughput
from engine.requests import GenerateRequest
from engine.runtime.model_runner import ModelRunner
from engine.runtime.replan import Replanner, budget_change, plan_change
from engine.runtime.scheduler import Scheduler
from engine.runtime.sequence import Sequence
from engine.tokenizer import Tokenizer


@dataclass
class Active:
    seq: Sequence
    stream: TextStream
    generator: torch.Generator  # this request's sampling randomness, on the engine's device


class LLMEngine:
    def __init__(self, runner: ModelRunner, scheduler: Scheduler, tokenizer: Tokenizer, max_model_len: int,
                 plan: MemoryPlan, replanner: Replanner):
        self.runner, self.scheduler, self.tokenizer = runner, scheduler, tokenizer
        self.max_model_len = max_model_len
        self.active: dict[str, Active] = {}
        self.device = runner.device
        self.plan, self.replanner = plan, replanner
        self.pending_budget: tuple[int | None, str] | None = None
        self.throughput = Throughput()
        self.controller = None  # OnlineController, attached for paged mode with a budget
        self.wsa_curve = None  # MV-WSA's predicted (expert share, tok/s) curve, refreshed at barriers
        self.host_tier = None  # engine.alloc.host_tier.HostTier of experts kept in host memory (None: on the device)
        self._tokenized: dict[str, list[int] | Exception] = {}  # tokenize_ahead's results, by request id

    @property
    def memory(self) -> "LLMEngine":
        """This engine re-splits device memory itself at drained barriers (engine.generation.core.MemoryControl)."""
        return self

    def request_budget(self, budget_bytes: int | None, reason: str = "budget changed") -> list[PlanEvent]:
        """Re-plan for a new budget at the next drained barrier (now, if nothing is running)."""
        self.pending_budget = (budget_bytes, reason)
        return self.at_barrier()

    def at_barrier(self) -> list[PlanEvent]:
        """At a drained barrier (nothing running or waiting): apply a pending budget, else let the online
        controller re-split the pool."""
        if self.scheduler.has_work:
            return []
        if self.pending_budget is not None:
            budget, reason = self.pending_budget
            self.pending_budget = None
            return [budget_change(self, budget, reason)]
        if self.controller is None:
            return []
        self.runner.experts.settle()  # graphed decode steps' routing reaches the controller first
        decision = self.controller.decide(self.plan)
        events = [plan_change(self, decision.plan, decision.reason)] if decision else []
        self.wsa_curve = predicted_curve(self.controller, self.plan)
        return events

    def admission_barrier(self) -> list[PlanEvent]:
        """Nothing running and requests waiting: the online controller sees what they need before they are
        admitted. KV they need beyond the pool is grown at once (taking expert slots), instead of running them one
        by one; KV they leave idle goes to the experts if the decode steps they will run pay for the re-split."""
        scheduler = self.scheduler
        if self.controller is None or scheduler.running or not scheduler.waiting or self.pending_budget is not None:
            return []
        need = scheduler.waiting_blocks(self.max_model_len)
        upcoming = scheduler.waiting_decode_steps(self.max_model_len)
        self.runner.experts.settle()
        decision = self.controller.decide(self.plan, waiting_blocks=need, upcoming_steps=upcoming)
        return [plan_change(self, decision.plan, decision.reason)] if decision else []

    def tokenize_ahead(self, request: GenerateRequest) -> None:
        """api.Engine's tokenizer thread: tokenise the prompt before it is queued, so that a megabyte prompt does
        not hold the engine thread (and every stream) while it is read. The tokenizer (tokenizers, jinja2) is
        thread-safe, and its encode releases the GIL."""
        try:
            self._tokenized[request.request_id] = prompt_token_ids(request, self.tokenizer, self.max_model_len)
        except Exception as err:  # noqa: BLE001 - raised again when the engine thread admits the request
            self._tokenized[request.request_id] = err

    def prompt_ids(self, request: GenerateRequest) -> list[int]:
        ready = self._tokenized.pop(request.request_id, None)
        if isinstance(ready, Exception):
            raise ready
        return ready if ready is not None else prompt_token_ids(request, self.tokenizer, self.max_model_len)

    def add(self, request: GenerateRequest) -> None:
        """Validate, tokenise and queue a request; raises a WispError (nothing is queued) if it is unusable."""
        seq = Sequence(request_id=request.request_id, token_ids=self.prompt_ids(request), sampling=request.sampling)
        if not self.scheduler.fits_at_all(seq):
            raise PromptTooLongError(
                f"the prompt has {len(seq.token_ids)} tokens, more than the whole KV cache holds; shorten it"
            )
        seed = request.sampling.seed if request.sampling.seed is not None else int.from_bytes(os.urandom(8), "little")
        generator = torch.Generator(device=self.device).manual_seed(seed)
        stream = TextStream.for_request(self.tokenizer, request, seq.token_ids)
        self.active[request.request_id] = Active(seq, stream, generator)
        self.scheduler.add(seq)

    def cancel(self, request_id: str) -> list[Event]:
        self._tokenized.pop(request_id, None)
        active = self.active.get(request_id)
        return [self._finish(active, "cancelled")] if active else []

    def fail_all(self, message: str) -> list[Event]:
        """End every request with an error (the step itself failed); the engine stays usable."""
        return [self._fail(active, message) for active in list(self.active.values())]

    def _fail(self, active: Active, message: str) -> FinishEvent:
        finish = self._finish(active, "error")
        return FinishEvent(**{**finish.__dict__, "error": message})

    def expert_counters(self):
        """A snapshot of the cumulative expert counters (engine thread: settles graphed steps)."""
        return self.runner.experts.counters.snapshot()

    def stats(self):
        from engine.runtime.stats import collect_stats

        return collect_stats(self)

    def close(self) -> None:
        self.runner.experts = None

    @property
    def has_work(self) -> bool:
        return self.scheduler.has_work

    def step(self) -> list[Event]:
        seqs, is_prefill = self.scheduler.schedule()
        if not seqs:
            return []
        logits = self.runner.run(seqs, is_prefill)
        rows = [self.active[seq.request_id] for seq in seqs]
        tokens, logprobs = sample(logits, [seq.sampling for seq in seqs], [active.generator for active in rows])
        if self.controller is not None:
            self.controller.observe_kv(self.scheduler.block_manager.num_used_blocks, self.scheduler.preemptions)
        now = time.perf_counter()
        self.throughput.record(now, len(seqs), is_prefill)
        events: list[Event] = []
        for seq, token, logprob in zip(seqs, tokens, logprobs):
            events.extend(self._accept_alone(self.active[seq.request_id], token, logprob, now))
        return events

    def _accept_alone(self, active: Active, token: int, logprob: float, now: float) -> list[Event]:
        """Accept one row's token; a failure in its sampling or its text handling ends that request alone."""
        if token == FAILED_TOKEN:
            return [self._fail(active, "generation failed: the model's scores for this request were not numbers (NaN)")]
        try:
            return self._accept(active, token, logprob, now)
        except Exception as err:  # noqa: BLE001 - this request's stop strings, parsers or detokenizer
            return [self._fail(active, f"generation failed: {type(err).__name__}: {err}")]

    def _accept(self, active: Active, token: int, logprob: float, now: float) -> list[Event]:
        seq = active.seq
        if seq.first_token_time is None:
            seq.first_token_time = now
            seq.prompt_cache_hits = seq.num_cached_tokens
        seq.token_ids.append(token)
        seq.logprobs.append(logprob)
        delta = active.stream.push(token)
        events: list[Event] = [TokenEvent(seq.request_id, token, delta.text, logprob, delta.reasoning)]
        reason = self._finish_reason(seq, token, delta.stopped)
        if reason:
            events.append(self._finish(active, reason))
        return events

    def _finish_reason(self, seq: Sequence, token: int, stopped: bool) -> str | None:
        if stopped or (token in self.tokenizer.eos_token_ids and not seq.sampling.ignore_eos):
            return "stop"
        if seq.num_output_tokens >= seq.sampling.max_tokens or len(seq.token_ids) >= self.max_model_len:
            return "length"
        return None

    def _finish(self, active: Active, reason: str) -> FinishEvent:
        seq = active.seq
        self.scheduler.finish(seq)
        del self.active[seq.request_id]
        stream = active.stream
        return FinishEvent(
            request_id=seq.request_id, reason=reason, text=stream.final_text(),
            token_ids=tuple(seq.output_ids), logprobs=tuple(seq.logprobs), stats=self._stats(seq),
            reasoning=stream.final_reasoning(), tool_calls=tuple(stream.tool_calls),
        )

    def _stats(self, seq: Sequence) -> RequestStats:
        end = time.perf_counter()
        first = seq.first_token_time or end
        decode_tokens = max(seq.num_output_tokens - 1, 0)
        return RequestStats(
            prompt_tokens=seq.num_prompt_tokens, cached_prompt_tokens=seq.prompt_cache_hits,
            generated_tokens=seq.num_output_tokens, ttft_s=first - seq.arrival_time,
            decode_tok_s=decode_tokens / (end - first) if decode_tokens and end > first else 0.0,
            total_s=end - seq.arrival_time, num_preemptions=seq.num_preemptions,
        )
