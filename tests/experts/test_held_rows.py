"""Graphed decode steps of a pager whose every layer holds every expert (engine.experts.pager.held_rows): no LRU
kernel and no copy launch, the same bits as resident mode, hits still counted, the switch taken once the pool fills
on the device, and the host LRUs given the recency of the held steps back. The device pager's kernels run in
Triton's interpreter on the CPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.alloc.miss_curve import step_unique

pytest.importorskip("triton", reason="the device pager's kernels need Triton")

EXPERTS, TOP_K, LAYERS = 16, 4, [0, 1]


@pytest.fixture
def store():
    from engine.experts.formats.store import ExpertStore
    from engine.quant.dense_layout import DenseLayout

    store = ExpertStore(DenseLayout(8, 4, torch.float32), LAYERS, EXPERTS, "cpu")
    generator = torch.Generator().manual_seed(0)
    for block in store.blocks.values():
        block.copy_(torch.randn(block.shape, generator=generator))
    return store


def pager_of(store, capacity: int):
    from engine.experts.providers.paged import PagedExperts

    return PagedExperts(store, torch.device("cpu"), {layer: capacity for layer in LAYERS})


def resident_out(store, layer, x, ids, weights):
    """What resident mode computes: row `expert id` of the layer's blocks."""
    return store.layout.for_layer(layer).run_rows(x, store.blocks[layer], ids.reshape(-1), ids, weights)


def steps(seed: int, count: int):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        ids = torch.from_numpy(np.stack([rng.choice(EXPERTS, TOP_K, replace=False) for _ in range(2)]))  # [2, K]
        yield torch.randn(2, 8, dtype=torch.float32), ids, torch.rand(2, TOP_K)


class Forbidden:
    """Stands in for a kernel that a held step must not launch."""

    def __init__(self):
        self.launches = 0

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches += 1
        return launch


def forbid_bookkeeping(device_side) -> tuple[Forbidden, Forbidden]:
    device_side.state.lru_step, device_side.state.copy_rows = Forbidden(), Forbidden()
    return device_side.state.lru_step, device_side.state.copy_rows


def test_a_pool_holding_every_expert_skips_the_lru_kernel_and_copies_with_resident_bits(store):
    pager = pager_of(store, EXPERTS)
    pager.warm({layer: list(range(EXPERTS)) for layer in LAYERS})
    device_side = pager.device_pager
    before = pager.counters.h2d_bytes  # the warm-up's copies
    device_side.begin_step(2, TOP_K)
    assert device_side.held is not None
    lru_step, copy_rows = forbid_bookkeeping(device_side)
    unique = 0
    for step, (x, ids, weights) in enumerate(steps(1, 5)):
        if step:
            device_side.begin_step(2, TOP_K)
        for layer in LAYERS:
            out = device_side.forward(layer, x, ids, weights)
            assert torch.equal(out, resident_out(store, layer, x, ids, weights))
            unique += len(step_unique(ids.numpy()))
    assert lru_step.launches == copy_rows.launches == 0
    counters = pager.counters
    assert counters.hits == unique and counters.misses == 0 and counters.h2d_bytes == before


def test_the_pool_filling_on_the_device_switches_to_held_rows_at_the_next_settle(store):
    pager = pager_of(store, EXPERTS)
    device_side = pager.device_pager
    device_side.begin_step(2, TOP_K)
    assert device_side.held is None
    for x, ids, weights in steps(2, 12):  # 12 steps x 8 entries: every expert of every layer misses once
        device_side.begin_step(2, TOP_K)
        for layer in LAYERS:
            assert torch.equal(device_side.forward(layer, x, ids, weights), resident_out(store, layer, x, ids, weights))
    generation = device_side.generation
    misses = pager.counters.misses  # settles: the pool is full now
    assert misses == EXPERTS * len(LAYERS) and device_side.held is not None and device_side.generation > generation
    lru_step, _ = forbid_bookkeeping(device_side)
    last = None
    for x, ids, weights in steps(3, 3):
        device_side.begin_step(2, TOP_K)
        for layer in LAYERS:
            assert torch.equal(device_side.forward(layer, x, ids, weights), resident_out(store, layer, x, ids, weights))
        last = ids
    assert lru_step.launches == 0 and pager.counters.misses == misses
    device_side.to_host()  # the held steps' recency goes back to the host LRUs
    recent = [int(e) for e in step_unique(last.numpy())]
    for layer in LAYERS:
        assert list(pager.host_pager.lru[layer].slots)[-len(recent):] == recent


def test_a_pool_short_of_one_slot_keeps_the_lru_path_and_a_shrink_leaves_held_rows(store):
    pager = pager_of(store, EXPERTS)
    pager.warm({layer: list(range(EXPERTS)) for layer in LAYERS})
    pager.device_pager.begin_step(2, TOP_K)
    assert pager.device_pager.held is not None
    generation = pager.device_pager.generation
    pager.set_capacity({layer: EXPERTS - 1 for layer in LAYERS})
    pager.device_pager.begin_step(2, TOP_K)
    assert pager.device_pager.held is None and pager.device_pager.generation > generation
    x, ids, weights = next(steps(4, 1))
    assert torch.equal(pager.device_pager.forward(0, x, ids, weights), resident_out(store, 0, x, ids, weights))


def test_held_steps_keep_at_most_one_entry_per_expert_and_replay_the_order_of_last_use():
    """A long session on held rows remembers each layer's experts once (not every step), and replaying gives the host
    LRUs what touching every step's ids in order would have."""
    from engine.alloc.expert_lru import ExpertLRU
    from engine.experts.pager.held_rows import HeldRows

    held = HeldRows(LAYERS, EXPERTS, torch.device("cpu"))
    rng = np.random.default_rng(0)
    steps = [(layer, rng.integers(0, EXPERTS, size=(1, TOP_K))) for _ in range(500) for layer in LAYERS]
    for start in range(0, len(steps), 7):
        held.note(steps[start:start + 7])
    assert all(len(recent) <= EXPERTS for recent in held.recent.values())

    start_order = rng.permutation(EXPERTS).tolist()

    def full_lrus():
        lrus = {layer: ExpertLRU(EXPERTS) for layer in LAYERS}
        for lru in lrus.values():
            lru.slots.update((expert, expert) for expert in start_order)
        return lrus

    replayed, stepped = full_lrus(), full_lrus()
    held.replay(replayed)
    for layer, ids in steps:
        stepped[layer].touch(int(e) for e in step_unique(ids))
    assert all(list(replayed[layer].slots) == list(stepped[layer].slots) for layer in LAYERS)
    assert not any(held.recent.values())
