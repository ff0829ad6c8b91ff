"""Pick the expert provider a MemoryPlan asks for."""

from __future__ import annotations

import torch

from engine.alloc.memory_plan import MemoryPlan
from engine.alloc.prefetch_predictor import CoOccurrencePredictor
from engine.experts.providers.paged import PagedExperts
from engine.experts.provider import ExpertProvider
from engine.experts.providers.resident import ResidentExperts
from engine.experts.providers.static import StaticOffloadExperts
from engine.experts.formats.store import ExpertStore
from engine.expert_modes import ExpertMode


def make_provider(plan: MemoryPlan, store: ExpertStore, device: torch.device, top_k: int,
                  prefetch: bool) -> ExpertProvider:
    if plan.mode is ExpertMode.RESIDENT:
        return ResidentExperts(store)
    if plan.mode is ExpertMode.STATIC:
        return StaticOffloadExperts(store, device, plan.offloaded_layers)
    layers = list(store.blocks)
    predictor = CoOccurrencePredictor(layers, store.num_experts, count=max(top_k, plan.min_layer_slots // 2)) if prefetch else None
    return PagedExperts(store, device, dict(zip(layers, plan.layer_slots)), predictor)
