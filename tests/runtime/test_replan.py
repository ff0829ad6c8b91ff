"""A budget change re-plans at a drained barrier, keeps cached chat prefixes that fit, refuses what cannot fit."""

from __future__ import annotations

import threading

import pytest

from engine.alloc.memory_plan import GiB, MiB
from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.kv.block_manager import BlockManager
from tests.kv.test_block_manager import Seq


def plan_events(engine):
    events, arrived = [], threading.Event()

    def listener(event):
        events.append(event)
        arrived.set()

    engine.add_plan_listener(listener)
    return events, arrived


@pytest.mark.parametrize("model_type", ["qwen3_moe", "deepseek_v2"])  # deepseek_v2: MLA's latent pool
def test_budget_change_keeps_the_chat_prefix(tiny_model_dir, model_type):
    """Turn two reuses turn one's cached blocks after the pool shrank (prefill of a span behind a cached prefix)."""
    folder = str(tiny_model_dir(model_type))
    sampling = SamplingParams(max_tokens=12, ignore_eos=True)
    turn1 = [{"role": "user", "content": "def fib(n):"}]
    with Engine(EngineOptions(model=folder, device="cpu", experts="paged", budget_bytes=GiB, block_size=4)) as engine:
        events, arrived = plan_events(engine)
        first = engine.generate(GenerateRequest(messages=tuple(turn1), sampling=sampling))
        old_blocks = engine.plan.kv_blocks
        engine.set_budget(GiB - 256 * MiB)
        assert arrived.wait(10)
        assert events[0].error is None and events[0].new.kv_blocks < old_blocks
        assert engine.stats().plan.kv_blocks == events[0].new.kv_blocks
        turn2 = turn1 + [{"role": "assistant", "content": first.text}, {"role": "user", "content": "more"}]
        second = engine.generate(GenerateRequest(messages=tuple(turn2), sampling=sampling))
    assert second.stats.cached_prompt_tokens >= first.stats.prompt_tokens - 4
    with Engine(EngineOptions(model=folder, device="cpu", block_size=4)) as fresh:
        assert fresh.generate(GenerateRequest(messages=tuple(turn2), sampling=sampling)).token_ids == second.token_ids


def test_too_small_budget_is_refused_and_nothing_changes(tiny_model_dir):
    with Engine(EngineOptions(model=str(tiny_model_dir("olmoe")), device="cpu", experts="paged",
                              budget_bytes=GiB)) as engine:
        events, arrived = plan_events(engine)
        before = engine.plan
        engine.set_budget(64 * MiB)
        assert arrived.wait(10)
        assert events[0].new is None and "minimum is" in events[0].error
        assert engine.stats().plan == before
        assert engine.generate(GenerateRequest(prompt="x", sampling=SamplingParams(max_tokens=3))).reason != "error"


def test_block_pool_shrink_keeps_the_most_recent_prefixes():
    manager = BlockManager(num_blocks=12, block_size=2)
    old, recent = Seq([1, 2, 3, 4, 5]), Seq([7, 8, 9, 10, 11])
    for seq in (old, recent):
        manager.allocate(seq)
        manager.deallocate(seq)
    moves = manager.resize(3)
    assert len(moves) == 3 and manager.num_blocks == 3  # both of recent's full blocks, then old's first
    assert len(manager.hash_to_block) == 3
    assert manager.can_allocate(Seq([1, 2, 9, 9, 9]))  # old's first block is cached but may be recycled
    probe_recent = Seq([7, 8, 9, 10, 11])
    manager.allocate(probe_recent)
    assert probe_recent.num_cached_tokens == 4
