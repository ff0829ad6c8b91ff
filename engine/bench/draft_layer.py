"""`wisp bench --speculative mtp` on random weights: the shape's draft (MTP / nextn) layer in its family's published
layout, with random weights in the compute dtype, planned as the engine's builder plans a checkpoint's
(engine.model.mtp_sizes) and run at every proposal for its cost; the drafts verified and their acceptance stay the
replay's (engine.generation.speculative.replay.ReplayedDrafter), since random weights accept nothing."""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator

import torch

from engine.alloc.memory_plan import ModelSizes
from engine.bench.synthetic import WEIGHT_STD
from engine.model.args import ModelArgs
from engine.model.families import family
from engine.model.loader import LoadedWeights
from engine.model.mtp_names import DraftLayerNames
from engine.model.mtp_sizes import with_draft_layer

PLANNED = "bench_draft_layer"  # ModelArgs.extra key: the draft layer's layout style, counted in every bench plan


def draft_layout(args: ModelArgs) -> DraftLayerNames | None:
    """The draft layer's layout of the shape's family (Qwen3.5/3.6, Qwen3-Next: mtp; GLM-4.5, DeepSeek-V3: nextn;
    Qwen3's fine-tunes such as the bundled demo: mtp), None where the family has none."""
    return family(args.model_type).draft_layer


def with_planned_draft_layer(weights: LoadedWeights) -> LoadedWeights:
    """weights whose args carry the draft layer (ModelArgs.extra), so that every plan of the session counts it."""
    names = draft_layout(weights.args)
    if names is None:
        return weights
    return replace(weights, args=replace(weights.args, extra={**weights.args.extra, PLANNED: names.style}))


def planned_sizes(sizes: ModelSizes, args: ModelArgs) -> ModelSizes:
    """sizes with the draft layer counted where args carry it: its dense weights and experts (no head of its own:
    it reads the model's lm_head) and one more KV layer."""
    return with_draft_layer(sizes, args, has_head=False) if args.extra.get(PLANNED) else sizes


def is_planned(args: ModelArgs) -> bool:
    return bool(args.extra.get(PLANNED))


class RandomDraftTensors:
    """engine.model.mtp_loader.DraftTensors of random values drawn on the device (norms at one), as
    engine.bench.synthetic draws the model's."""

    def __init__(self, args: ModelArgs, device: torch.device, seed: int = 4):
        self.args, self.device = args, device
        self.generator = torch.Generator(device=device).manual_seed(seed)

    def has_layer(self) -> bool:
        return True

    def missing(self) -> str:
        return ""

    def has_head(self) -> bool:
        return False

    def dense(self, param: str, shape: tuple[int, ...]) -> torch.Tensor:
        if param.endswith("norm.weight"):
            return torch.ones(shape, device=self.device)
        return torch.randn(shape, generator=self.generator, device=self.device) * WEIGHT_STD

    def experts(self) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        D, I = self.args.hidden_size, self.args.moe_intermediate_size
        for _ in range(self.args.num_experts):
            yield tuple(torch.randn(shape, generator=self.generator, device=self.device) * WEIGHT_STD
                        for shape in ((I, D), (I, D), (D, I)))


def attach_random_drafter(engine, weights: LoadedWeights, device: torch.device, draft_graphs: bool = False):
    """The shape's draft layer with random weights attached to engine as the builder attaches a checkpoint's ->
    its engine.generation.speculative.mtp.MtpDrafter (draft_graphs: builder.attach_draft_tensors')."""
    from engine.runtime.builder import attach_draft_tensors

    names = draft_layout(weights.args)
    return attach_draft_tensors(engine, weights, RandomDraftTensors(weights.args, device), names, device,
                                draft_graphs)
