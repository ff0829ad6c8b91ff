"""One request's output as every backend tracks it (as vLLM's output processor): a sampled token becomes a
TokenEvent and perhaps ends the request ("stop", "length"); the end becomes a FinishEvent with its
RequestStats. The backend keeps what is its own (the scheduler's sequence, llama.cpp's pending prompt) and
frees it when a request finishes. Engine thread only."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from engine.events import ErrorKind, FinishEvent, RequestStats, TokenEvent
from engine.generation.text_stream import TextStream
from engine.sampling import SamplingParams


@dataclass
class RequestState:
    request_id: str
    sampling: SamplingParams
    num_prompt_tokens: int
    stream: TextStream
    generator: torch.Generator  # this request's sampling randomness
    arrival_time: float = field(default_factory=time.perf_counter)
    output_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    cached_prompt_tokens: int = 0  # prompt tokens whose KV came from the prefix cache
    first_token_time: float | None = None
    num_spec_proposed: int = 0  # drafts verified for this request (speculative decoding)
    num_spec_accepted: int = 0  # drafts the model agreed with

    def accept(self, token: int, logprob: float, now: float, *, is_end_token: bool, max_model_len: int,
               top: tuple[tuple[int, float], ...] = (), is_complete: bool = False) -> tuple[TokenEvent, str | None]:
        """Record a sampled token: its event, and the finish reason when it ends the request (else None).
        `top` holds the alternatives the request asked for; `is_complete` says its structured output is whole."""
        if self.first_token_time is None:
            self.first_token_time = now
        self.output_ids.append(token)
        self.logprobs.append(logprob)
        delta = self.stream.push(token)
        event = TokenEvent(self.request_id, token, delta.text, logprob, delta.reasoning, top, delta.tool_call_deltas)
        return event, self.finish_reason(delta.stopped or is_complete, is_end_token, max_model_len)

    def finish_reason(self, stopped: bool, is_end_token: bool, max_model_len: int) -> str | None:
        if stopped or (is_end_token and not self.sampling.ignore_eos):
            return "stop"
        total = self.num_prompt_tokens + len(self.output_ids)
        if len(self.output_ids) >= self.sampling.max_tokens or total >= max_model_len:
            return "length"
        return None

    def finish(self, reason: str, num_preemptions: int = 0, error: str | None = None) -> FinishEvent:
        """The request's end; an error here is a failed step (ErrorKind.FAILED)."""
        stream = self.stream
        return FinishEvent(
            request_id=self.request_id, reason=reason, text=stream.final_text(), token_ids=tuple(self.output_ids),
            logprobs=tuple(self.logprobs), stats=self.stats(num_preemptions), error=error,
            reasoning=stream.final_reasoning(), tool_calls=tuple(stream.tool_calls),
            error_kind=ErrorKind.FAILED if error is not None else None,
        )

    def stats(self, num_preemptions: int = 0) -> RequestStats:
        return RequestStats.timed(self.arrival_time, self.first_token_time, time.perf_counter(),
                                  self.num_prompt_tokens, len(self.output_ids), self.cached_prompt_tokens,
                                  num_preemptions, self.num_spec_proposed, self.num_spec_accepted)
