"""Paged KV bookkeeping without torch: allocation, prefix hits, reuse order, appends."""

from dataclasses import dataclass, field

from engine.kv.block_manager import BlockManager


@dataclass
class Seq:
    token_ids: list[int]
    block_table: list[int] = field(default_factory=list)
    num_cached_tokens: int = 0


def test_allocate_and_free_return_every_block():
    manager = BlockManager(num_blocks=8, block_size=4)
    seq = Seq(list(range(10)))
    assert manager.can_allocate(seq)
    manager.allocate(seq)
    assert len(seq.block_table) == 3 and manager.num_free_blocks == 5
    manager.deallocate(seq)
    assert manager.num_free_blocks == 8 and seq.block_table == []


def test_prefix_of_a_finished_sequence_is_reused_but_last_token_recomputed():
    manager = BlockManager(num_blocks=8, block_size=4)
    first = Seq(list(range(8)))
    manager.allocate(first)
    manager.deallocate(first)
    again = Seq(list(range(8)))
    manager.allocate(again)
    assert again.num_cached_tokens == 4  # the block holding the last token is recomputed
    longer = Seq(list(range(8)) + [100, 101, 102])
    manager.allocate(longer)
    assert longer.num_cached_tokens == 8
    assert longer.block_table[:2] == again.block_table[:2]


def test_different_prefix_gets_no_hit():
    manager = BlockManager(num_blocks=8, block_size=4)
    manager.allocate(Seq(list(range(9))))
    other = Seq([99] + list(range(1, 9)))
    manager.allocate(other)
    assert other.num_cached_tokens == 0


def test_generated_tokens_become_cacheable_when_their_block_fills():
    manager = BlockManager(num_blocks=8, block_size=4)
    seq = Seq([1, 2, 3])
    manager.allocate(seq)
    for token in [4, 5, 6, 7, 8]:
        seq.token_ids.append(token)
        assert manager.can_append(seq)
        manager.append(seq)
    assert len(seq.block_table) == 2
    manager.deallocate(seq)
    follow_up = Seq([1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
    manager.allocate(follow_up)
    assert follow_up.num_cached_tokens == 8


def test_cache_gives_way_to_fresh_allocations_oldest_first():
    manager = BlockManager(num_blocks=4, block_size=2)
    old = Seq([1, 2, 3, 4, 5])
    manager.allocate(old)
    manager.deallocate(old)
    filler = Seq([9, 9, 9, 9, 9, 9, 9])
    manager.allocate(filler)  # needs all 4 blocks: the cached ones are recycled
    assert manager.num_free_blocks == 0
    manager.deallocate(filler)
    assert manager.hash_to_block and Seq([1, 2, 3, 4, 5]).num_cached_tokens == 0
    probe = Seq([1, 2, 3, 4, 5])
    manager.allocate(probe)
    assert probe.num_cached_tokens == 0


def test_can_allocate_counts_revived_cached_blocks():
    manager = BlockManager(num_blocks=3, block_size=2)
    seq = Seq([1, 2, 3, 4, 5])
    manager.allocate(seq)
    manager.deallocate(seq)
    assert manager.can_allocate(Seq([1, 2, 3, 4, 5, 6]))
    assert not manager.can_allocate(Seq(list(range(20, 28))))
