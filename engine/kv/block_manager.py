"""Paged KV bookkeeping (torch-free): a pool of fixed-size blocks, per-sequence block tables, and a prefix
cache keyed by a chain hash of full blocks, so a chat's next turn reuses the blocks of the turns before it."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Protocol


class PagedSequence(Protocol):
    token_ids: list[int]
    block_table: list[int]
    num_cached_tokens: int


@dataclass
class Block:
    block_id: int
    ref_count: int = 0
    hash: int | None = None
    token_ids: tuple[int, ...] = field(default=())


def chain_hash(previous: int | None, token_ids: tuple[int, ...]) -> int:
    return hash((previous, token_ids))


def cache_keys(seq: PagedSequence) -> list:
    """What the prefix cache keys a sequence's blocks by: its tokens, image tokens by their image's bytes."""
    images = getattr(seq, "images", None)
    return seq.token_ids if images is None else images.cache_keys + seq.token_ids[len(images.cache_keys):]


class BlockManager:
    """Free blocks are reused oldest-first; a freed block keeps its hash until reused (the prefix cache)."""

    def __init__(self, num_blocks: int, block_size: int):
        self.block_size = block_size
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free: deque[int] = deque(range(num_blocks))
        self.free_set = set(self.free)
        self.hash_to_block: dict[int, int] = {}

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    @property
    def num_free_blocks(self) -> int:
        return len(self.free)

    def blocks_needed(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def _full_block_hashes(self, token_ids: list[int], limit: int):
        """(block index, hash, tokens) of full blocks that end before token `limit`."""
        previous = None
        for index in range(limit // self.block_size):
            tokens = tuple(token_ids[index * self.block_size : (index + 1) * self.block_size])
            previous = chain_hash(previous, tokens)
            yield index, previous, tokens

    def _cached_prefix(self, token_ids: list[int]) -> list[int]:
        """Block ids that already hold this sequence's leading blocks; the last token is always recomputed."""
        hits = []
        for _, block_hash, tokens in self._full_block_hashes(token_ids, len(token_ids) - 1):
            block_id = self.hash_to_block.get(block_hash)
            if block_id is None or self.blocks[block_id].token_ids != tokens:
                break
            hits.append(block_id)
        return hits

    def can_allocate(self, seq: PagedSequence) -> bool:
        hits = self._cached_prefix(cache_keys(seq))
        revived = sum(1 for block_id in hits if block_id in self.free_set)
        return self.blocks_needed(len(seq.token_ids)) - len(hits) + revived <= self.num_free_blocks

    def allocate(self, seq: PagedSequence, num_written: int | None = None) -> None:
        """Blocks for all of seq's tokens; full blocks among its first num_written positions (default all: the step
        being scheduled writes them) join the prefix cache."""
        assert not seq.block_table
        hits = self._cached_prefix(cache_keys(seq))
        for block_id in hits:
            self._take(block_id)
        seq.block_table = hits + [self._take_fresh() for _ in range(self.blocks_needed(len(seq.token_ids)) - len(hits))]
        seq.num_cached_tokens = len(hits) * self.block_size
        self.register(seq, len(seq.token_ids) if num_written is None else num_written)

    def register(self, seq: PagedSequence, num_tokens: int) -> None:
        """The sequence's full blocks among its first num_tokens positions join the prefix cache: called when the
        step that writes their KV is scheduled (a long prompt's later chunks are not yet written, so not shared)."""
        for index in range(num_tokens // self.block_size):
            self._register_block(seq, index)

    def deallocate(self, seq: PagedSequence) -> None:
        for block_id in reversed(seq.block_table):
            block = self.blocks[block_id]
            block.ref_count -= 1
            if block.ref_count == 0:
                self.free.append(block_id)
                self.free_set.add(block_id)
        seq.block_table = []
        seq.num_cached_tokens = 0

    def can_append(self, seq: PagedSequence) -> bool:
        """Room for the next token (the one about to be computed, already in token_ids)?"""
        return len(seq.block_table) >= self.blocks_needed(len(seq.token_ids)) or self.num_free_blocks > 0

    def append(self, seq: PagedSequence) -> None:
        """Called once token_ids has grown by one: add a block if needed, hash the block that just filled."""
        num_tokens = len(seq.token_ids)
        if len(seq.block_table) < self.blocks_needed(num_tokens):
            seq.block_table.append(self._take_fresh())
        if num_tokens % self.block_size == 0:
            self._register_block(seq, num_tokens // self.block_size - 1)

    def reserve(self, seq: PagedSequence, num_tokens: int) -> None:
        """Blocks for num_tokens positions ahead of token_ids: a decode step launched before the token it reads is
        known (the engine's overlapped steps). append(), once that token is in token_ids, registers the block."""
        while len(seq.block_table) < self.blocks_needed(num_tokens):
            seq.block_table.append(self._take_fresh())

    def _register_block(self, seq: PagedSequence, index: int) -> None:
        previous = self.blocks[seq.block_table[index - 1]].hash if index else None
        if index and previous is None:
            return
        block = self.blocks[seq.block_table[index]]
        if block.hash is None:
            block.token_ids = tuple(cache_keys(seq)[index * self.block_size : (index + 1) * self.block_size])
            block.hash = chain_hash(previous, block.token_ids)
            self.hash_to_block[block.hash] = block.block_id

    def _take(self, block_id: int) -> None:
        block = self.blocks[block_id]
        if block.ref_count == 0:
            self.free.remove(block_id)
            self.free_set.discard(block_id)
        block.ref_count += 1

    def _take_fresh(self) -> int:
        block_id = self.free.popleft()
        self.free_set.discard(block_id)
        block = self.blocks[block_id]
        if block.hash is not None and self.hash_to_block.get(block.hash) == block_id:
            del self.hash_to_block[block.hash]
        block.hash, block.token_ids, block.ref_count = None, (), 1
        return block_id

    @property
    def num_used_blocks(self) -> int:
        return self.num_blocks - self.num_free_blocks

    def resize(self, num_blocks: int) -> dict[int, int]:
        """Change the pool size while no block is in use, keeping the most recently freed cached blocks
        that fit. Returns old block id -> new block id of the kept blocks (their KV must move with them)."""
        if self.num_used_blocks:
            raise RuntimeError("the KV pool can only be resized when no sequence holds blocks")
        recent_cached = [b for b in reversed(self.free) if self.blocks[b].hash is not None][:num_blocks]
        moves = {old: new for new, old in enumerate(reversed(recent_cached))}
        kept = [self.blocks[old] for old in moves]
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.hash_to_block = {}
        for old, new in moves.items():
            block = self.blocks[new]
            block.hash, block.token_ids = kept[new].hash, kept[new].token_ids
            self.hash_to_block[block.hash] = new
        fresh = range(len(moves), num_blocks)
        self.free = deque([*fresh, *moves.values()])  # cached blocks are reused last
        self.free_set = set(self.free)
        return moves

