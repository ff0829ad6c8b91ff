"""Continuous batching (torch-free): admit waiting prompts while KV blocks allow, otherwise decode every
running sequence one token; when KV runs out, preempt the newest sequence by recompute (never drop it).

Chunked prefill (prefill_chunk > 0): a prompt runs at most prefill_chunk positions a step, each chunk attending
to the KV the chunks before it wrote, and while a prompt is in chunks its steps alternate with decode steps of
the sequences already streaming, so a long prompt does not stall their tokens. A chunk's positions depend only
on its own prompt and prefill_chunk, never on what else runs, so its results are those of the request alone."""

from __future__ import annotations

from collections import deque

from engine.kv.block_manager import BlockManager
from engine.runtime.sequence import Sequence, SeqStatus


class Scheduler:
    def __init__(self, block_manager: BlockManager, max_num_seqs: int, max_num_batched_tokens: int,
                 prefill_chunk: int = 0):
        self.block_manager = block_manager
        self.max_num_seqs = max_num_seqs
        self.max_num_batched_tokens = max_num_batched_tokens
        self.prefill_chunk = prefill_chunk  # most prompt positions of a sequence a step; 0: whole prompts
        self.decode_turn = False  # a chunk step just ran: the streaming sequences decode next
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
        """-> (sequences to run this step, is_prefill). The sequences of a prefill step whose prompt is not done
        after it (is_prefilling) get no token from it."""
        if self.decode_turn:
            self.decode_turn = False
            decode = self._schedule_decode()
            if decode:
                return decode, False
        prefill = self._schedule_prefill()
        if prefill:
            self.decode_turn = any(seq.is_prefilling for seq in prefill)
            return prefill, True
        return self._schedule_decode(), False

    def _schedule_prefill(self) -> list[Sequence]:
        scheduled = [seq for seq in self.running if seq.is_prefilling]  # prompts in chunks: their next chunk
        num_tokens = sum(self._next_chunk(seq) for seq in scheduled)
        while self.waiting and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            if scheduled and num_tokens + len(seq.token_ids) > self.max_num_batched_tokens:
                break
            if not self.block_manager.can_allocate(seq):
                break
            self.block_manager.allocate(seq, num_written=0)
            seq.prefill_end = seq.num_cached_tokens
            num_tokens += self._next_chunk(seq)
            seq.status = SeqStatus.RUNNING
            self.waiting.popleft()
            self.running.append(seq)
            scheduled.append(seq)
        return scheduled

    def _next_chunk(self, seq: Sequence) -> int:
        """Schedule the sequence's next prompt positions (from where its last chunk ended) -> how many."""
        start, total = seq.prefill_end, len(seq.token_ids)
        end = min(total, start + self.prefill_chunk) if self.prefill_chunk else total
        if seq.images is not None:  # images whose tokens attend both ways stay whole in one chunk
            end = seq.images.chunk_end(start, end)
        seq.prefill_start, seq.prefill_end, seq.is_prefilling = start, end, end < total
        self.block_manager.register(seq, end)
        return end - start

    def _schedule_decode(self) -> list[Sequence]:
        scheduled = []
        for seq in list(self.running):
            if seq not in self.running or seq.is_prefilling:
                continue  # preempted below to make room for an older sequence, or its prompt still in chunks
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
        seq.status, seq.is_prefilling = SeqStatus.WAITING, False
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
