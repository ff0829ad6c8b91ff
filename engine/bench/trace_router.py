"""Trace-driven routing for benchmarks: each benchmark sequence replays one request of a recorded trace
(its prefill rows for the prompt, then its decode rows token by token). The router still computes its
logits; only the chosen expert ids come from the trace, so the copy and compute path is the real one."""

from __future__ import annotations

import numpy as np
import torch

from engine.traces.format import Trace


MIN_DECODE_ROWS = 16


def replay_streams(trace: Trace) -> list[tuple[np.ndarray, np.ndarray]]:
    """(prompt rows, decode rows) [n, L, K] of each trace request that decoded, as benchmark sequences replay them."""
    rows_prefill = trace.row_is_prefill()
    streams = []
    for seq in np.unique(trace.seq_ids):
        mine = trace.seq_ids == seq
        prefill, decode = trace.expert_ids[mine & rows_prefill], trace.expert_ids[mine & ~rows_prefill]
        if len(decode):
            streams.append((prefill if len(prefill) else decode, decode))
    if not streams:
        raise ValueError("the trace has no decode rows to replay")
    # A request that decoded only a few tokens would repeat them for every benchmark token, so after the
    # first every expert hits (qwen3-twin_code's third request has one decode row: 68 tok/s at 12 GiB, where
    # the others gave 17-19). Such requests are left out unless the trace has nothing longer.
    long_enough = [stream for stream in streams if len(stream[1]) >= MIN_DECODE_ROWS]
    return long_enough or streams


class TraceRouter:
    def __init__(self, trace: Trace, device: torch.device):
        self.device = device
        self.streams = replay_streams(trace)
        self.step_ids: torch.Tensor | None = None  # [T, L, K] of the current step
        self.buffers: dict[tuple, torch.Tensor] = {}
        self.stream_of: dict[str, int] = {}  # request id -> replayed trace request
        self.column: dict[int, int] = {}  # model layer -> trace layer: a trace holds MoE layers only

    def rows(self, stream: int, start: int, count: int, is_prefill: bool) -> np.ndarray:
        prefill, decode = self.streams[stream % len(self.streams)]
        source = prefill if is_prefill else decode
        return source[np.arange(start, start + count) % len(source)]

    def begin_step(self, seqs, is_prefill: bool, lookahead: int = 0) -> None:
        """Called by the model runner before each forward with the step's sequences (in row order); lookahead: the
        positions the step is ahead of their token_ids (ModelRunner.lookahead)."""
        rows = []
        for seq in seqs:
            stream = self.stream_of.setdefault(seq.request_id, len(self.stream_of))
            if is_prefill:
                rows.append(self.rows(stream, seq.prefill_start, seq.prefill_end - seq.prefill_start, True))
            else:
                positions = 1 + len(seq.draft_ids)  # a verify step: the drafts' positions are the next decode rows
                rows.append(self.rows(stream, len(seq.token_ids) - 1 - seq.num_prompt_tokens + lookahead, positions,
                                      False))
        ids = torch.from_numpy(np.concatenate(rows).astype(np.int64))  # [T, L, K]
        if tuple(ids.shape) not in self.buffers:  # one buffer per shape: a captured graph keeps reading its own
            self.buffers[tuple(ids.shape)] = torch.empty_like(ids, device=self.device)
        self.step_ids = self.buffers[tuple(ids.shape)]
        if self.device.type == "cuda":  # queued behind the steps in flight, from memory no later step writes
            self.step_ids.copy_(ids.pin_memory(), non_blocking=True)
        else:
            self.step_ids.copy_(ids)

    def drive(self, engine, before_step=None) -> None:
        """Route a fresh engine's steps from the trace, each request replaying the next trace request from the
        first. before_step(seqs, is_prefill), if given, runs before each step's routing is loaded."""
        def step_hook(seqs, is_prefill):
            if before_step is not None:
                before_step(seqs, is_prefill)
            self.begin_step(seqs, is_prefill, engine.runner.lookahead)

        engine.runner.routing_override, engine.runner.step_hook = self, step_hook
        self.stream_of.clear()
        moe_layers = [layer for layer, is_moe in enumerate(engine.runner.model.args.moe_layers) if is_moe]
        self.column = {layer: column for column, layer in enumerate(moe_layers)}

    def __call__(self, layer: int) -> torch.Tensor:
        return self.step_ids[:, self.column[layer]]
