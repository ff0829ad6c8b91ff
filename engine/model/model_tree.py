"""The empty module tree of a model, for a loader to fill: the shared MoE stack, the hybrid one for models
with linear-attention layers, or the sandwich-norm one (gemma4)."""

from __future__ import annotations

import gc

import torch

from engine.model.args import ModelArgs
from engine.model.hybrid import HybridTransformer
from engine.model.sandwich import SandwichTransformer
from engine.model.transformer import MoeTransformer


def meta_model(args: ModelArgs) -> MoeTransformer:
    """The module tree with no storage, for the loader to fill. Building modules under torch.device("meta")
    leaves a reference cycle of finished frames (torch's __torch_function__ path), and those frames hold
    their callers' locals: without the collect, a closed Engine's device memory stayed allocated until the
    next cyclic garbage collection."""
    with torch.device("meta"):
        if args.sandwich is not None:
            model = SandwichTransformer(args)
        else:
            model = HybridTransformer(args) if args.is_hybrid else MoeTransformer(args)
    gc.collect()
    return model
