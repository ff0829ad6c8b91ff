"""Lookahead for large steps: the next MoE layer's missing experts cross the link while this layer computes.

A large layer-step reads its routed ids on the host (one sync), then copies its misses while it computes. Without
lookahead the link stands idle from this layer's last copy until the next layer's ids are read: the rest of this
layer's compute, the next attention, the sync and the host's plan. A step with at least MIN_ENTRIES_PER_EXPERT
(token, expert) entries per expert routes nearly every expert of a layer, so the next layer will need nearly every
expert it does not hold. As soon as this layer's own copies are queued, the host queues the next layer's
non-resident experts (those its previous large step routed most first) into a ring of device rows, behind them on
the copy stream. Those copies wait only for the ring's previous reader, never for this layer's compute. The next
layer computes the staged experts it routed straight from the ring once their copies have landed (one event), and
streams its other misses through its slots as before.

Staged experts are not cached: the next layer's slots and LRU change only by the misses it still streams, so the
working set decode steps rely on is protected as before. A layer with free slots is not staged for: its misses fill
them and stay cached, as without lookahead. A staged expert the layer routes counts as a hit and a
prefetch used (as the prefetcher's experts do); every staged expert counts as prefetched.

Memory: the ring lives for one large step (allocated at its first layer that stages, freed at its last MoE layer).
Its rows are engine.alloc.memory_plan.gathered_rows: the plan's term for a small step's gathered experts, which a
large step never allocates. Bits are resident's: the same layout calls compute every expert; only where its block
sits and when it arrived differ."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from engine.alloc.memory_plan import gathered_rows

MIN_ENTRIES_PER_EXPERT = 16  # (token, expert) entries per expert of a step that stages: 256 tokens of Qwen3's top-8/128


def configured_rows(expert_bytes: int, device_type: str = "cuda") -> int:
    """Ring rows: the plan's gathered rows on CUDA (where a copy stream runs beside compute), none elsewhere (the
    CPU's copies are done when issued). Tests give a pager rows on the CPU to run the staging there."""
    return gathered_rows(expert_bytes) if device_type == "cuda" else 0


@dataclass
class Staged:
    layer: int
    rows: dict[int, int]  # expert -> its ring row
    event: object  # the end of their copies (None on the CPU: already done)


class Lookahead:
    def __init__(self, pager, rows: int):
        """pager: the HostPager whose slots, copies and counters this uses; rows: the ring's size (0: off)."""
        self.pager, self.rows = pager, rows
        layers = sorted(pager.lru)  # the order a forward runs them
        self.following = dict(zip(layers, layers[1:]))
        self.ring: torch.Tensor | None = None  # [rows, numel] while a large step stages
        self.free_event = None  # on the compute stream, after the ring's last reader
        self.ready_event = None  # the copies of the experts the current layer takes from the ring
        self.staged: Staged | None = None
        self.routed_counts: dict[int, np.ndarray] = {}  # per layer: its last large step's entries per expert

    def can_stage(self, layer: int, entries: int) -> bool:
        return bool(self.rows) and layer in self.following and entries >= MIN_ENTRIES_PER_EXPERT * self.num_experts

    @property
    def num_experts(self) -> int:
        return self.pager.host.num_experts

    def begin(self, layer: int, entries: int) -> bool:
        """Before a large layer-step computes: whether it will stage its following layer (the ring is ready if so).
        Allocated before this layer queues any compute, so the ring waits only for what came before it."""
        if not self.can_stage(layer, entries):
            return False
        if self.ring is None:
            layout, device = self.pager.layout, self.pager.device
            self.ring = torch.empty(self.rows, layout.numel, dtype=layout.dtype, device=device)
            stream = self.pager.copies.stream
            if stream is not None:
                self.ring.record_stream(stream)  # freed at the step's end: not reused before its copies are done
            self.free_event = self._record()
        return True

    def take(self, layer: int, misses: list[int]) -> dict[int, int]:
        """The layer's misses staged for it: expert -> ring row."""
        staged, self.staged = self.staged, None
        if staged is None or staged.layer != layer:
            if staged is not None:  # left by a step that did not finish
                self.end()
            return {}
        self.ready_event = staged.event
        return {expert: staged.rows[expert] for expert in misses if expert in staged.rows}

    def compute(self, layer: int, taken: dict[int, int], index: dict[int, int], dispatch, out) -> None:
        """The taken experts from the ring, in one layout call, once their copies have landed."""
        self.pager.copies.wait_for(self.ready_event)
        units = [index[expert] for expert in taken]
        self.pager.layout.for_layer(layer).run_group(self.ring, dispatch, units, list(taken.values()), out)
        self.free_event = self._record()

    def stage(self, layer: int) -> None:
        """Queue copies of the following layer's non-resident experts into the ring (after this layer's copies)."""
        following = self.following[layer]
        lru = self.pager.lru[following]
        if len(lru.slots) < lru.capacity:  # its misses fill free slots and stay cached there, as without lookahead
            return
        candidates = [e for e in range(self.num_experts) if e not in lru]
        counts = self.routed_counts.get(following)
        if counts is not None:
            candidates.sort(key=lambda e: -counts[e])  # stable: ties in id order
        experts = candidates[: self.rows]
        if not experts:
            return
        self.pager.rows.copy([(self.ring[i], following, e) for i, e in enumerate(experts)], after=self.free_event)
        copies = self.pager.copies
        self.staged = Staged(following, {e: i for i, e in enumerate(experts)},
                             copies.last_event if copies.stream is not None else None)
        self.pager.counters.prefetched += len(experts)

    def observe(self, layer: int, ids_host: np.ndarray) -> None:
        """A large step's routed ids at `layer`: which of its experts to stage first next time."""
        self.routed_counts[layer] = np.bincount(ids_host.reshape(-1), minlength=self.num_experts)

    def end(self) -> None:
        """Drop the ring and anything staged in it (the step's last MoE layer, a small step, a resize)."""
        self.ring = self.staged = self.free_event = self.ready_event = None

    def _record(self):
        if self.pager.copies.stream is None:
            return None
        event = torch.cuda.Event()
        event.record()
        return event
