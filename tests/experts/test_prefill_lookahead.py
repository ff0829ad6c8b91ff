"""Lookahead for large steps (engine.experts.pager.lookahead): the next MoE layer's missing experts are queued into
a ring while this layer still computes; outputs stay resident's bits, short steps page exactly as without it, and
the working set is kept."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from engine.experts.pager import lookahead
from engine.experts.providers.paged import PagedExperts
from engine.experts.providers.resident import ResidentExperts
from engine.quant.gguf_store import quant_store_from_gguf
from tests.quant.test_quant_providers import CPU, E, TYPES, fake_layer, outputs, routing

LAYERS = list(TYPES)


@pytest.fixture(scope="module")
def store():
    return quant_store_from_gguf({layer: fake_layer(layer, types) for layer, types in TYPES.items()}, CPU, pin=False)


@pytest.fixture
def stages_40_tokens(monkeypatch):
    """The test steps' 40 tokens x top-2 over 8 experts (10 entries an expert) stage their next layer."""
    monkeypatch.setattr(lookahead, "MIN_ENTRIES_PER_EXPERT", 8)


def paged(store, slots: int, rows: int) -> PagedExperts:
    pager = PagedExperts(store, CPU, {layer: slots for layer in LAYERS})
    pager.host_pager.lookahead.rows = rows
    return pager


@pytest.mark.parametrize("rows", [1, 3, E])
@pytest.mark.parametrize("slots", [2, 3, 5])
def test_lookahead_gives_resident_bits(store, stages_40_tokens, slots, rows):
    expected = outputs(ResidentExperts(store))
    pager = paged(store, slots, rows)
    for got, want in zip(outputs(pager), expected):
        assert torch.equal(got, want)
    counters = pager.counters
    assert counters.prefetched > 0 and counters.prefetch_used > 0  # the ring was used
    assert counters.h2d_bytes == (counters.misses + counters.prefetched) * store.expert_bytes


def before_groups(host_pager, before) -> None:
    """Wrap host_pager's layout so that before(layer, table, units) runs ahead of each of its run_group calls."""
    layout = host_pager.layout

    class Layer:
        def __init__(self, layer):
            self.inner, self.layer = layout.for_layer(layer), layer

        def run_group(self, table, dispatch, units, slots, out):
            before(self.layer, table, units)
            self.inner.run_group(table, dispatch, units, slots, out)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    class Layout:
        def for_layer(self, layer):
            return Layer(layer)

        def __getattr__(self, name):
            return getattr(layout, name)

    host_pager.layout = Layout()


class Log:
    """The pager's copies and layout calls in the order the host issued them (its copy engine and layout wrapped)."""

    def __init__(self, pager: PagedExperts):
        self.entries, host_pager = [], pager.host_pager
        self.lookahead, self.layer = host_pager.lookahead, None
        copy = host_pager.rows.copy

        def logged_copy(targets, after=None):
            for slot, layer, expert in targets:
                self.entries.append(("copy", layer, expert, self.in_ring(slot)))
            copy(targets, after)

        host_pager.rows.copy = logged_copy
        before_groups(host_pager, lambda layer, table, units: self.entries.append(
            ("compute", layer, len(units), self.in_ring(table))))

    def in_ring(self, tensor) -> bool:
        ring = self.lookahead.ring
        return ring is not None and tensor.untyped_storage().data_ptr() == ring.untyped_storage().data_ptr()

    def index(self, kind: str, layer: int, in_ring: bool, last: bool = False) -> int | None:
        found = [i for i, e in enumerate(self.entries) if e[0] == kind and e[1] == layer and e[3] == in_ring]
        return (found[-1] if last else found[0]) if found else None


def large_step(pager: PagedExperts, seed: int) -> None:
    x, ids, weights = routing(40, seed)
    pager.begin_step(is_prefill=True)
    for layer in LAYERS:
        pager.forward(layer, x, ids, weights)


def test_next_layer_copies_are_queued_before_this_layer_computes_its_last_group(store, stages_40_tokens):
    """With 2 slots a layer streams its misses one at a time, so it still has groups to compute when every copy is
    queued: the next layer's copies must already be queued then, and the next layer must not copy them again."""
    pager = paged(store, 2, 3)
    large_step(pager, 1)  # fills the slots and the ring's ranking
    log = Log(pager)
    large_step(pager, 2)
    for layer, following in zip(LAYERS, LAYERS[1:]):
        staged = log.index("copy", following, True)
        assert staged is not None, f"nothing staged for layer {following}"
        assert staged < log.index("compute", layer, False, last=True), (layer, following)
        assert log.index("compute", following, True) > staged
        ring_experts = {e[2] for e in log.entries if e[:2] == ("copy", following) and e[3]}
        slot_experts = {e[2] for e in log.entries if e[:2] == ("copy", following) and not e[3]}
        assert len(ring_experts) == 3 and not ring_experts & slot_experts
    assert log.index("copy", LAYERS[0], True) is None  # the first MoE layer has no layer before it
    assert pager.host_pager.lookahead.ring is None  # freed at the step's last MoE layer


def test_short_steps_page_as_without_lookahead(store):
    """At the default threshold the test steps (at most 10 entries an expert) never stage: the same copies, slots,
    LRU order and counters as with lookahead off, and no ring."""
    runs = []
    for rows in (0, E):
        pager = paged(store, 3, rows)
        log = Log(pager)
        outputs(pager)
        lrus = {layer: list(lru.slots.items()) for layer, lru in pager.host_pager.lru.items()}
        runs.append((log.entries, lrus, replace(pager.counters, copy_s=0.0)))  # copy_s: wall time
        assert pager.host_pager.lookahead.ring is None
    assert runs[0] == runs[1]


def test_lookahead_keeps_the_working_set(store, stages_40_tokens):
    pager = paged(store, 4, E)
    x, ids, weights = routing(1, 7)
    for _ in range(2):  # a decode step makes its experts the most recently used
        pager.begin_step(is_prefill=False)
        for layer in LAYERS:
            pager.forward(layer, x, ids, weights)
    kept = {layer: lru.working_set(pager.host_pager.protected_share) for layer, lru in pager.host_pager.lru.items()}
    large_step(pager, 3)
    for layer, lru in pager.host_pager.lru.items():
        assert kept[layer] and kept[layer] <= set(lru.slots), layer


@pytest.mark.parametrize("expert_bytes", [4096, 3_059_712, 6 * 2**20, 400 * 2**20])
def test_the_ring_fits_the_plans_gathered_experts_term(expert_bytes):
    """The ring is counted in the workspace's term for a small step's gathered experts (never live at once)."""
    from engine.alloc.memory_plan import GATHER_LIMIT_BYTES, GATHER_MAX_ENTRIES

    assert lookahead.gathered_rows(expert_bytes) * expert_bytes <= min(GATHER_LIMIT_BYTES,
                                                                       GATHER_MAX_ENTRIES * expert_bytes)
    assert lookahead.gathered_rows(3_059_712) == 64  # Qwen3-30B-A3B's Q4_K_M slots: 187 MiB


def test_it_is_on_for_cuda_and_off_elsewhere(store):
    assert PagedExperts(store, CPU, {layer: 2 for layer in LAYERS}).host_pager.lookahead.rows == 0
    assert lookahead.configured_rows(3_059_712, "cuda") == lookahead.gathered_rows(3_059_712) > 0
    assert lookahead.configured_rows(3_059_712, "cpu") == 0
