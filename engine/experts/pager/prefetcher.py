"""Prefetch for the host pager: after a layer-step, start copying the experts a predictor expects the next MoE
layer to need, so their copies overlap this layer's compute."""

from __future__ import annotations

from engine.experts.pager.host_pager import HostPager


class Prefetcher:
    def __init__(self, predictor, moe_layers: list[int], pager: HostPager):
        """predictor: observe(layer, needed) and predict(layer, needed, next layer)
        (engine.alloc.prefetch_predictor)."""
        self.predictor, self.moe_layers, self.pager = predictor, moe_layers, pager

    def after_step(self, layer: int, needed: list[int]) -> None:
        position = self.moe_layers.index(layer)
        self.predictor.observe(layer, needed)
        if position + 1 >= len(self.moe_layers):
            return
        following = self.moe_layers[position + 1]
        lru = self.pager.lru[following]
        guesses = [e for e in self.predictor.predict(layer, needed, following) if e not in lru]
        loaded = self.pager.load(following, guesses, keep=set())
        if loaded:
            self.pager.copies.mark_prefetch(following, loaded)
            self.pager.counters.prefetched += len(loaded)
