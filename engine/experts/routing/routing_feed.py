"""Routing listeners of one provider: who hears each layer-step's needed experts, and of which kind of step."""

from __future__ import annotations

import numpy as np

from engine.alloc.miss_curve import step_unique


class RoutingFeed:
    def __init__(self):
        self.listeners: list = []  # RoutingListener
        self.is_decode = False  # of the step now running (the runner says, before each forward)

    @property
    def has_listeners(self) -> bool:
        return bool(self.listeners)

    def add(self, listener) -> None:
        self.listeners.append(listener)

    def begin_step(self, is_prefill: bool) -> None:
        self.is_decode = not is_prefill

    def publish(self, layer: int, needed: list[int], is_decode: bool | None = None) -> None:
        """needed: the layer-step's unique experts in order of first use."""
        for listener in self.listeners:
            listener(layer, needed, self.is_decode if is_decode is None else is_decode)

    def publish_ids(self, layer: int, ids_host: np.ndarray, is_decode: bool | None = None) -> None:
        """ids_host [T, K] of one layer-step, on the host."""
        if self.listeners:
            self.publish(layer, [int(e) for e in step_unique(ids_host)], is_decode)


class FeedsRouting:
    """A provider's begin_step and add_routing_listener, for providers whose listeners live in `self.feed`."""

    feed: RoutingFeed

    def begin_step(self, is_prefill: bool) -> None:
        self.feed.begin_step(is_prefill)

    def add_routing_listener(self, listener) -> None:
        self.feed.add(listener)
