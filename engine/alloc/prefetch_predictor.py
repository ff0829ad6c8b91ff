"""Routing prefetch predictor (torch-free): P(expert e' at the next MoE layer | experts used at this layer),
learnt online from co-occurrence counts. Off by default: the paper measured it slowing decode (docs/design.md)."""

from __future__ import annotations

import numpy as np


class CoOccurrencePredictor:
    def __init__(self, moe_layers: list[int], num_experts: int, count: int):
        self.moe_layers, self.count = moe_layers, count
        self.counts = {layer: np.zeros((num_experts, num_experts), dtype=np.float32) for layer in moe_layers}
        self.last: dict[int, list[int]] = {}

    def observe(self, layer: int, needed: list[int]) -> None:
        """Record this step's experts at `layer`, pairing them with the previous MoE layer's."""
        position = self.moe_layers.index(layer)
        if position > 0 and self.moe_layers[position - 1] in self.last:
            previous = self.last[self.moe_layers[position - 1]]
            self.counts[self.moe_layers[position - 1]][np.ix_(previous, needed)] += 1.0
        self.last[layer] = needed

    def predict(self, layer: int, needed: list[int], following: int) -> list[int]:
        """Most likely experts at `following` given `needed` at `layer` (only ones seen together before)."""
        scores = self.counts[layer][needed].sum(axis=0)
        order = np.argsort(-scores, kind="stable")[: self.count]
        return [int(e) for e in order if scores[e] > 0]
