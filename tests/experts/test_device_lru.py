"""The device-side pager's kernels (engine.experts.pager.pager_kernels) run in Triton's interpreter on the CPU:
the same LRU decisions as the host ExpertLRU, the same counts, and the copied bytes land in the right rows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.alloc.expert_lru import ExpertLRU
from engine.alloc.miss_curve import step_unique

pytest.importorskip("triton", reason="the device pager's kernels need Triton")  # installed by the test extra


def host_lru_step(lru: ExpertLRU, free: list[int], ids: np.ndarray) -> tuple[list[int], list[int]]:
    """The host pager's rule for one layer-step. -> (the missed experts, those of them left with no slot)."""
    needed = [int(e) for e in step_unique(ids)]
    _, misses = lru.split(needed)
    placed = 0
    for expert in misses:
        if lru.place(expert, set(needed), lambda: free.pop() if free else None) is None:
            break  # every slot holds an expert this step needs: the rest stay uncached
        placed += 1
    lru.touch(needed)
    return misses, misses[placed:]


@pytest.mark.parametrize("tokens", [1, 2, 4])  # 4 tokens x top-4: more needed experts than slots in some steps
def test_device_lru_decides_like_the_host_lru(tokens):
    from engine.experts.pager.device_lru import DeviceLRU

    experts, top_k, capacity, base = 32, 4, {0: 9, 3: 12}, {0: 0, 3: 9}
    device_state = DeviceLRU(list(capacity), experts, capacity, base, torch.device("cpu"))
    lrus = {layer: ExpertLRU(cap) for layer, cap in capacity.items()}
    free = {layer: list(range(base[layer] + cap - 1, base[layer] - 1, -1)) for layer, cap in capacity.items()}
    device_state.push(lrus)
    host_experts = torch.arange(experts * 8, dtype=torch.int32).view(experts, 8)
    pool = torch.full((21, 8), -7, dtype=torch.int32)
    rng = np.random.default_rng(tokens)
    totals = np.zeros(2, dtype=np.int64)
    overflowed = 0
    for step in range(30):
        for layer in capacity:
            ids = rng.integers(0, experts // 2 if step < 15 else experts, (tokens, top_k))
            misses, over = host_lru_step(lrus[layer], free[layer], ids)
            totals += (len(step_unique(ids)) - len(misses), len(misses))
            rows, miss_src, miss_dst, over_src, over_dst = device_state.step(layer, torch.from_numpy(ids))
            device_state.copy_misses(host_experts, pool, miss_src, miss_dst)
            count = int((miss_src >= 0).sum())
            assert sorted(miss_src[:count].tolist()) == sorted(set(misses) - set(over))
            flat = torch.from_numpy(ids).reshape(-1)
            assert torch.equal(over_src, torch.where(torch.isin(flat, torch.tensor(over, dtype=flat.dtype)), flat, -1))
            assert torch.equal(over_dst, torch.arange(flat.numel()))
            gathered = pool[rows]
            device_state.copy_misses(host_experts, gathered, over_src, over_dst)  # the rest, straight to the step
            assert torch.equal(gathered, host_experts[flat])
            overflowed += len(over)
    assert overflowed > 0 if tokens == 4 else overflowed == 0
    pulled = {layer: ExpertLRU(cap) for layer, cap in capacity.items()}
    device_state.pull(pulled)
    assert {k: list(v.slots) for k, v in pulled.items()} == {k: list(v.slots) for k, v in lrus.items()}
    counts = device_state.take_counts()
    assert (counts[:, 0].sum(), counts[:, 1].sum()) == tuple(totals)
    assert device_state.take_counts().sum() == 0


def test_forget_mode_misses_every_needed_expert_once():
    from engine.experts.pager.device_lru import DeviceLRU

    device_state = DeviceLRU([5], 16, {5: 1}, {5: 0}, torch.device("cpu"))
    host_experts = torch.arange(16 * 4, dtype=torch.int32).view(16, 4)
    scratch = torch.zeros(8, 4, dtype=torch.int32)
    ids = torch.tensor([[3, 7, 3, 1], [7, 2, 3, 9]])
    for _ in range(2):  # nothing is remembered between steps
        rows, miss_src, miss_dst, over_src, _ = device_state.step(5, ids, forget=True)
        device_state.copy_misses(host_experts, scratch, miss_src, miss_dst)
        assert miss_src.tolist()[:5] == [3, 7, 1, 2, 9] and (miss_src[5:] == -1).all()
        assert torch.equal(scratch[rows], host_experts[ids.reshape(-1)])
        assert (over_src == -1).all()  # forget mode has a row for every entry
    assert device_state.take_counts().tolist() == [[0, 10, 0]]


def test_a_resize_frees_the_old_pool_before_allocating_the_new_one(monkeypatch):
    """The graphed path keeps views of the pool; a resize must drop them first, or two pools would coexist
    and the budget would be exceeded (seen on the H200: a 12 GiB plan peaked at 19 GiB after a re-split)."""
    from engine.quant.dense_layout import DenseLayout
    from engine.experts.providers.paged import PagedExperts
    from engine.experts.formats.store import ExpertStore

    store = ExpertStore(DenseLayout(8, 4, torch.float32), [0, 1], 16, "cpu")
    pager = PagedExperts(store, torch.device("cpu"), {0: 6, 1: 6})
    device_side, pool = pager.device_pager, pager.host_pager.pool
    device_side.begin_step(1, 4)  # builds the device state and the word view of the pool
    assert device_side.pool_words is not None
    old_pool = pool.tensor.data_ptr()
    freed_first = []
    real_empty = torch.empty

    def spy(*args, **kwargs):
        if args and args[0] == 14:  # the new pool: 7 + 7 slots
            views = [device_side.pool_words] if device_side.pool_words is not None else []
            freed_first.append(all(view.data_ptr() != old_pool for view in views) and pool.num_slots == 0)
        return real_empty(*args, **kwargs)

    monkeypatch.setattr(torch, "empty", spy)
    pager.set_capacity({0: 7, 1: 7})
    assert freed_first == [True]


def test_a_re_split_compiles_no_new_kernel_variant():
    """lru_step's compile-time sizes depend on the step's shape only, never on a layer's slot count: the online
    controller's re-splits change slot counts, and each new variant took seconds to compile on the H200."""
    from engine.experts.pager.device_lru import DeviceLRU

    seen = []

    class Recording:
        def __init__(self, kernel):
            self.kernel = kernel

        def __getitem__(self, grid):
            def launch(*args, **constants):
                seen.append({k: v for k, v in constants.items() if k.isupper()})
                return self.kernel[grid](*args, **constants)
            return launch

    ids = torch.tensor([[3, 7, 1, 2]])
    for capacity in (4, 20, 64):  # a layer's slots before and after re-splits (64 = every expert)
        device_state = DeviceLRU([0], 64, {0: capacity}, {0: 0}, torch.device("cpu"))
        device_state.lru_step = Recording(device_state.lru_step)
        device_state.step(0, ids)
    assert len(seen) == 3 and seen[0] == seen[1] == seen[2]
