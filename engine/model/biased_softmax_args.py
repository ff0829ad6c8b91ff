"""The settings of the biased softmax router (engine.model.biased_softmax_router): ModelArgs.biased_softmax."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BiasedSoftmaxArgs:
    """A softmax router whose choice adds a per-expert correction bias to the probabilities (ERNIE 4.5's
    moe_statics); the chosen probabilities are renormalised over a denominator of at least norm_min."""

    norm_min: float = 1e-12
