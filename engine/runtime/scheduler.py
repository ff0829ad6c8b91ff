"""Continuous batching (torch-free): admit waiting prompts while KV blocks allow, otherwise decode every
running sequence one token; when KV runs out, preempt the newest sequence by recompute (never drop it)."""

from __future__ import annotations

from collections import deque

from engine.kv.block_manager import BlockManager
from engine.runtime.sequence import Sequence, SeqStatus


class Scheduler:
    def __init__(self, block_manager: BlockManager, max_num_seqs: int, max_num_batched_tokens: int):
        self.block_manager = block_manager
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.preemptions = 0  # since the engine started

    def add(self, seq: Sequence) -> None:
        self.waiting.append(seq)

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def waiting_blocks(self, max_model_len: int) -> int:
        """KV blocks the next admissions (up to max_num_seqs waiting requests) need to run to their end."""
        seqs = list(self.waiting)[: self.max_num_seqs]
        return sum(self.block_manager.blocks_needed(min(len(s.token_ids) + s.sampling.max_tokens, max_model_len))
                   for s in seqs)

    def waiting_decode_steps(self, max_model_len: int) -> int:
        """Decode steps the next admissions (up to max_num_seqs waiting requests, run together) will take at most:
        the longest of their max_tokens, cut at the context limit."""
        seqs = list(self.waiting)[: self.max_num_seqs]
        return max((min(s.sampling.max_tokens - s.num_output_tokens, max_model_len - len(s.token_ids)) for s in seqs),
                   default=0)

    def fits_at_all(self, seq: Sequence) -> bool:
        return self.block_manager.blocks_needed(len(seq.token_ids) + 1) <= self.block_manager.num_blocks

    def schedule(self) -> tuple[list[Sequence], bool]:
        """-> (sequences to run this step, is_prefill)."""
        prefill = self._schedule_prefill()
        if prefill:
            return prefill, True
        return self._schedule_decode(), False

    def _schedule_prefill(self) -> list[Sequence]:
        scheduled, num_tokens = [], 0
        while self.waiting and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            if scheduled and num_tokens + len(seq.token_ids) > self.max_num_batched_tokens:
                break
            if not self.block_manager.can_allocate(seq):
                break
            self.block_manager.allocate(seq)
            num_tokens += len(seq.token_ids) - seq.num_cached_tokens
            seq.status = SeqStatus.RUNNING
            self.waiting.popleft()
            self.running.append(seq)
            scheduled.append(seq)
        return scheduled

    def _schedule_decode(self) -> list[Sequence]:
        scheduled = []
        for seq in list(self.running):
            if seq not in self.running:
                continue  # preempted below to make room for an older sequence
            while not self.block_manager.can_append(seq) and self.running[-1] is not seq:
                self.preempt(self.running[-1])
            if not self.block_manager.can_append(seq):
                self.preempt(seq)
                continue
            self.block_manager.append(seq)
            scheduled.append(seq)
        return scheduled

    def preempt(self, seq: Sequence) -> None:
        """Free the sequence's blocks and requeue it first; its prompt and output so far are recomputed."""
        self.block_manager.deallocate(seq)
        self.running.remove(seq)
        seq.status = SeqStatus.WAITING
        seq.num_preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(seq)

    def finish(self, seq: Sequence) -> None:
        self.block_manager.deallocate(seq)
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        seq.status = SeqStatus.FINISHED
