"""The synchronous engine loop: admit requests, step the scheduler, run the model, sample, stream events.
Runs on whichever single thread owns torch (api.Engine's engine thread)."""

from __future__ import annotations

import os
import time

import torch

from engine.alloc.memory_plan import MemoryPlan
from engine.alloc.online_controller import predicted_curve
from engine.errors import PromptTooLongError
from engine.events import Event, FinishEvent
from engine.generation.grammar import GrammarCompiler
from engine.generation.logits_processors import RowContext, check_token_ids_in_vocabulary, top_alternative_tensors
from engine.generation.plan_event import PlanEvent
from engine.generation.prompt import prompt_token_ids
from engine.generation.request_state import RequestState
from engine.generation.sampler import FAILED_TOKEN, sample_tensors
from engine.generation.text_stream import TextStream
from engine.generation.throughput import Throughput
from engine.requests import GenerateRequest
from engine.runtime.active_request import Active, row_context
from engine.runtime.launched_step import LaunchedStep, read_back
from engine.runtime.model_runner import ModelRunner
from engine.runtime.replan import Replanner, budget_change, plan_change
from engine.runtime.scheduler import Scheduler
from engine.runtime.sequence import Sequence
from engine.runtime.speculation import DEFAULT_DRAFT_TOKENS, Speculation
from engine.runtime.verify_step import propose_drafts, run_verify_step
from engine.text.tokenizer import Tokenizer
from engine.vision.image_input import refuse_images


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
        self.grammars = GrammarCompiler(tokenizer)
        self._tokenized: dict[str, tuple | Exception] = {}  # tokenize_ahead's (ids, images), by request id
        # Overlapped decode steps (step()) on CUDA, where the host's work per token would otherwise leave the GPU
        # idle; rows with a linear-attention state (hybrid models) too: a dropped row's state row is zeroed by the
        # next prefill that takes it (tests/gpu/test_overlap.py). On the CPU they would only reorder the same work.
        self.overlap = self.device.type == "cuda"
        self.inflight: LaunchedStep | None = None  # the decode step launched ahead, its tokens not yet read
        self.steps_ahead = 0  # decode steps launched ahead so far
        self.speculation: Speculation | None = None  # drafts verified by decode steps (--speculative)
        self.drafts_by_default = False  # --speculative: requests that do not say draft
        self.max_draft_tokens = DEFAULT_DRAFT_TOKENS  # --draft-tokens within a small verify step (small_step_drafts)

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
        self._drop_inflight()
        if self.pending_budget is not None:
            budget, reason = self.pending_budget
            self.pending_budget = None
            events = [budget_change(self, budget, reason)]
        elif self.controller is None:
            return []
        else:
            self.runner.experts.settle()  # graphed decode steps' routing reaches the controller first
            decision = self.controller.decide(self.plan)
            events = [plan_change(self, decision.plan, decision.reason)] if decision else []
        if self.controller is not None:  # the curve's shares are of this plan's pool: redrawn for a new budget
            self.wsa_curve = predicted_curve(self.controller, self.plan)
        return events

    def admission_barrier(self) -> list[PlanEvent]:
        """Nothing running and requests waiting: the online controller sees what they need before they are
        admitted. KV they need beyond the pool is grown at once (taking expert slots), instead of running them one
        by one; KV they leave idle goes to the experts if the decode steps they will run pay for the re-split."""
        scheduler = self.scheduler
        if self.controller is None or scheduler.running or not scheduler.waiting or self.pending_budget is not None:
            return []
        self._drop_inflight()
        need = scheduler.waiting_blocks(self.max_model_len)
        upcoming = scheduler.waiting_decode_steps(self.max_model_len)
        self.runner.experts.settle()
        decision = self.controller.decide(self.plan, waiting_blocks=need, upcoming_steps=upcoming)
        return [plan_change(self, decision.plan, decision.reason)] if decision else []

    def tokenize_ahead(self, request: GenerateRequest) -> None:
        """api.Engine's tokenizer thread: tokenise the prompt before it is queued, so that a megabyte prompt does
        not hold the engine thread (and every stream) while it is read. The tokenizer (tokenizers, jinja2) is
        thread-safe, and its encode releases the GIL. The request's grammar is compiled here too (on the grammar
        workers), so that admitting it on the engine thread only copies the compiled matcher."""
        try:
            self.grammars.prepare(request)
            self._tokenized[request.request_id] = self.prompt_with_images(request)
        except Exception as err:  # noqa: BLE001 - raised again when the engine thread admits the request
            self._tokenized[request.request_id] = err

    def prompt_ids(self, request: GenerateRequest) -> tuple[list[int], object]:
        """-> (the prompt's token ids, its engine.vision PromptImages or None)."""
        ready = self._tokenized.pop(request.request_id, None)
        if isinstance(ready, Exception):
            raise ready
        return ready if ready is not None else self.prompt_with_images(request)

    def prompt_with_images(self, request: GenerateRequest) -> tuple[list[int], object]:
        """The prompt's ids with each image's tokens in place (engine.vision; images decoded here, on the calling
        thread); RequestError for images to a model without a vision tower."""
        ids = prompt_token_ids(request, self.tokenizer, self.max_model_len)
        vision = self.runner.vision
        if vision is None:
            refuse_images(request.messages, self.runner.model.args.model_type)
            return ids, None
        ids, images = vision.place(request.messages, ids)
        if len(ids) >= self.max_model_len:
            raise PromptTooLongError(f"the prompt has {len(ids)} tokens with its images but the context holds "
                                     f"{self.max_model_len}; send fewer or smaller images")
        return ids, images

    def add(self, request: GenerateRequest) -> None:
        """Validate, tokenise and queue a request; raises a WispError (nothing is queued) if it is unusable."""
        check_token_ids_in_vocabulary(request.sampling, getattr(self.tokenizer, "vocab_size", None))
        ids, images = self.prompt_ids(request)
        seq = Sequence(request_id=request.request_id, token_ids=ids, sampling=request.sampling, images=images)
        if not self.scheduler.fits_at_all(seq):
            raise PromptTooLongError(
                f"the prompt has {len(seq.token_ids)} tokens, more than the whole KV cache holds; shorten it"
            )
        seed = request.sampling.seed if request.sampling.seed is not None else int.from_bytes(os.urandom(8), "little")
        generator = torch.Generator(device=self.device).manual_seed(seed)
        stream = TextStream.for_request(self.tokenizer, request, seq.token_ids)
        state = RequestState(request.request_id, request.sampling, len(seq.token_ids), stream, generator)
        self.active[request.request_id] = Active(seq, state, self.grammars.for_request(request),
                                                 self._drafts(request))
        self.scheduler.add(seq)

    def _drafts(self, request: GenerateRequest) -> bool:
        """Does the request draft? Prompt lookup needs nothing loaded, so a request may ask for it on any engine."""
        drafts = self.drafts_by_default if request.speculative is None else request.speculative != "off"
        if drafts and self.speculation is None:
            self.speculation = Speculation(self.max_draft_tokens)
        return drafts

    def cancel(self, request_id: str) -> list[Event]:
        self._tokenized.pop(request_id, None)
        active = self.active.get(request_id)
        return [self._finish(active, "cancelled")] if active else []

    def fail_all(self, message: str) -> list[Event]:
        """End every request with an error (the step itself failed); the engine stays usable."""
        self.inflight = None
        return [self._fail(active, message) for active in list(self.active.values())]

    def _fail(self, active: Active, message: str) -> FinishEvent:
        return self._finish(active, "error", error=message)

    def expert_counters(self):
        """A snapshot of the cumulative expert counters (engine thread: settles graphed steps)."""
        return self.runner.experts.counters.snapshot()

    def stats(self):
        from engine.runtime.stats import collect_stats

        return collect_stats(self)

    def close(self) -> None:
        self._drop_inflight()
        self.runner.experts = None

    @property
    def has_work(self) -> bool:
        return self.scheduler.has_work

    def step(self) -> list[Event]:
        """Run one step and return its events. With overlap, a decode step whose sequences all go on is followed
        at once by the next, launched on its tokens while they are still on the device; this step's tokens are
        read and handled while the GPU computes that one, which the next call accepts."""
        started = time.perf_counter()
        launched, self.inflight = self.inflight, None
        if launched is not None and not self._live(launched):
            launched = None  # every sequence it ran ended (a stop, a cancel) before its tokens were read
        if launched is None:
            seqs, is_prefill = self.scheduler.schedule()
            if not seqs:
                return []
            if not is_prefill and self.speculation is not None and propose_drafts(self, seqs):
                return run_verify_step(self, seqs, started)
            launched = self._launch(seqs, is_prefill)
            if launched is None:
                return []
        if self.overlap and self._can_go_ahead(launched):
            self.inflight = self._launch_ahead(launched)
        drafting = self.speculation is not None and not launched.is_prefill and self._any_drafts(launched.seqs)
        events = self._accept_step(launched)
        if drafting:  # what a verify step must beat: this plain step, as it ran (launched ahead or not)
            self.speculation.draft_length.observe_plain(time.perf_counter() - started)
        if self.inflight is not None:
            live = self._live(self.inflight)
            for seq in live:  # the token the step in flight reads is in token_ids now: its block joins the cache
                self.scheduler.block_manager.append(seq)
            if not live:
                self.inflight = None
        return events

    def _launch(self, seqs: list[Sequence], is_prefill: bool) -> LaunchedStep | None:
        """Queue a scheduled step's model run and sampling; None if it gives no token (prompt chunks only)."""
        logits = self.runner.run(seqs, is_prefill)  # launched; on CUDA the grammar masks below overlap it
        if any(seq.is_prefilling for seq in seqs):  # a long prompt's chunk before its last: no token yet
            done = [row for row, seq in enumerate(seqs) if not seq.is_prefilling]
            seqs, logits = [seqs[row] for row in done], logits[done]
            if not seqs:
                return None
        rows = [self.active[seq.request_id] for seq in seqs]
        contexts = [row_context(active, logits.shape[-1], logits.device) for active in rows]
        return self._sample(seqs, is_prefill, logits, contexts)

    def _sample(self, seqs: list[Sequence], is_prefill: bool, logits: torch.Tensor,
                contexts: list[RowContext | None] | None) -> LaunchedStep:
        params = [seq.sampling for seq in seqs]
        generators = [self.active[seq.request_id].state.generator for seq in seqs]
        tokens, logprobs = sample_tensors(logits, params, generators, contexts)
        host, ready = read_back((tokens, logprobs, *top_alternative_tensors(logits, params)))
        return LaunchedStep(seqs, is_prefill, params, tokens, host, ready)

    def _can_go_ahead(self, launched: LaunchedStep) -> bool:
        """Can the next decode step of exactly these sequences be launched before this one's tokens are read?
        Not when the scheduler would do something else next (a request waits, a prompt is in chunks, a budget
        waits for a barrier), when a row needs its new token on the host to choose the next (penalties, bias, a
        grammar), when a row ends by length with this token, when its next KV block is not free without
        preempting, or when a row drafts and the draft-length rule gives the next step drafts. A row that stops
        with this token (a stop string, EOS, a cancel) has its row of the next step dropped: its KV write lands in
        a block it frees, and its linear-attention state row (hybrid models) is zeroed by the prefill of the next
        sequence that takes it, queued after this step."""
        runner, scheduler, seqs = self.runner, self.scheduler, launched.seqs
        if launched.is_prefill or runner.padded_decode is None or runner.routing_observer is not None:
            return False
        if scheduler.waiting or self.pending_budget is not None or len(scheduler.running) != len(seqs):
            return False
        if any(a is not b for a, b in zip(scheduler.running, seqs)):
            return False
        blocks = scheduler.block_manager
        new_blocks = 0
        for seq in seqs:
            active = self.active.get(seq.request_id)
            if active is None or active.grammar is not None or seq.sampling.changes_logits:
                return False
            if (seq.num_output_tokens + 1 >= seq.sampling.max_tokens
                    or len(seq.token_ids) + 1 >= min(self.max_model_len, runner.padded_decode.max_len)):
                return False
            new_blocks += len(seq.block_table) < blocks.blocks_needed(len(seq.token_ids) + 1)
        if new_blocks > blocks.num_free_blocks:
            return False
        # drafts are proposed from a row's tokens on the host: only a step the rule gives none goes ahead
        return not self._any_drafts(seqs) or self.speculation.declines_next()

    def _any_drafts(self, seqs: list[Sequence]) -> bool:
        return any((active := self.active.get(seq.request_id)) is not None and active.drafts for seq in seqs)

    def _launch_ahead(self, launched: LaunchedStep) -> LaunchedStep:
        """The decode step after `launched`, reading its sampled tokens on the device."""
        for seq in launched.seqs:
            self.scheduler.block_manager.reserve(seq, len(seq.token_ids) + 1)
        logits = self.runner.run(launched.seqs, False, ahead=launched.tokens)
        self.steps_ahead += 1
        return self._sample(launched.seqs, False, logits, None)

    def _drop_inflight(self) -> None:
        """Before a barrier moves device memory: a step still in flight (nothing runs, so its rows all ended) is
        waited for and dropped, so no queued kernel reads a KV pool or a graph the re-split replaces."""
        if self.inflight is not None:
            self.inflight.read()
            self.inflight = None

    def _live(self, launched: LaunchedStep) -> list[Sequence]:
        """The step's sequences that are still running (the rest ended after it was launched)."""
        return [seq for seq in launched.seqs
                if (active := self.active.get(seq.request_id)) is not None and active.seq is seq]

    def _accept_step(self, launched: LaunchedStep) -> list[Event]:
        tokens, logprobs, alternatives = launched.read()
        if self.controller is not None:
            self.controller.observe_kv(self.scheduler.block_manager.num_used_blocks, self.scheduler.preemptions)
        now = time.perf_counter()
        events: list[Event] = []
        accepted = 0
        for seq, token, logprob, top in zip(launched.seqs, tokens, logprobs, alternatives):
            active = self.active.get(seq.request_id)
            if active is None or active.seq is not seq:
                continue  # ended (a stop, a cancel) after this step was launched ahead of its last token
            accepted += 1
            events.extend(self._accept_alone(active, token, logprob, now, top))
        self.throughput.record(now, accepted, launched.is_prefill)
        return events

    def _accept_alone(self, active: Active, token: int, logprob: float, now: float,
                      top: tuple[tuple[int, float], ...] = ()) -> list[Event]:
        """Accept one row's token; a failure in its sampling or its text handling ends that request alone."""
        if token == FAILED_TOKEN:
            return [self._fail(active, "generation failed: the model's scores for this request were not numbers (NaN)")]
        try:
            return self._accept(active, token, logprob, now, top)
        except Exception as err:  # noqa: BLE001 - this request's stop strings, parsers or detokenizer
            return [self._fail(active, f"generation failed: {type(err).__name__}: {err}")]

    def _accept(self, active: Active, token: int, logprob: float, now: float,
                top: tuple[tuple[int, float], ...] = ()) -> list[Event]:
        seq, state = active.seq, active.state
        if state.first_token_time is None:
            state.cached_prompt_tokens = seq.num_cached_tokens
        seq.token_ids.append(token)
        if active.grammar is not None:
            active.grammar.accept(token)
        is_complete = active.grammar is not None and active.grammar.is_complete
        event, reason = state.accept(token, logprob, now, is_end_token=token in self.tokenizer.eos_token_ids,
                                     max_model_len=self.max_model_len, top=top, is_complete=is_complete)
        return [event, self._finish(active, reason)] if reason else [event]

    def _finish(self, active: Active, reason: str, error: str | None = None) -> FinishEvent:
        self.scheduler.finish(active.seq)
        if self.runner.vision is not None:
            self.runner.vision.forget(active.seq.request_id)
        if self.speculation is not None:
            self.speculation.forget(active.seq.request_id, active.seq.token_ids)
        del self.active[active.seq.request_id]
        return active.state.finish(reason, active.seq.num_preemptions, error)
