"""Routing and dispatch of a MoE layer-step, whatever the expert storage format.

Small steps (decode): every (token, k) entry's expert block is gathered into one [T*K, numel] buffer and the
layout runs them all at once: a handful of kernels per layer and no host sync when everything is resident.
Large steps (prefill): the step's token rows are gathered once, grouped by expert, and each expert computes in
place over its own span of them: on CUDA the grouped GEMM runs every expert of the group in two launches
(engine.quant.grouped_gemm), elsewhere layout.run_expert one expert at a time (no gather and no scatter per expert;
under deterministic algorithms a scatter is CUDA's sort-based index_put_, several launches). The grouping is
planned on the host from the ids read back (plan_dispatch: the pager must know which experts to fetch) or, where
every expert of the layer is in one table on the device and the grouped GEMM runs, on the device
(plan_on_device): the same order, no host sync.

Which path runs depends only on the step's shape (tokens, top_k, expert size), never on where experts live, and
either way the (token, k) results are summed per token in ascending expert-id order (transformers' order). So
where an expert's bytes live, and in which group it was fetched, never changes a bit.

Shapes: T tokens of the step, K routed experts per token (top_k), E experts of a layer, D hidden size,
U unique experts of a step, numel elements of one expert block.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from engine.alloc.memory_plan import GATHER_LIMIT_BYTES, GATHER_MAX_ENTRIES  # the gathered buffer is workspace
from engine.system.triton_support import HAS_TRITON, fused_step



def route(router_logits: torch.Tensor, top_k: int, normalize: bool, weights_fp32: bool):
    """Softmax router -> (ids [T, K] long, weights [T, K]); weights in fp32 for Mixtral, else the logits dtype."""
    if router_logits.is_cuda and fused_step():  # the same selection in one kernel
        from engine.experts.routing import fused_router

        if fused_router.can_fuse(router_logits):
            dtype = torch.float32 if weights_fp32 else router_logits.dtype
            return fused_router.fused_route(router_logits, top_k, normalize, dtype)
    probs = F.softmax(router_logits, dim=-1, dtype=torch.float32)  # [T, E]
    weights, ids = torch.topk(probs, top_k, dim=-1)  # [T, K]
    if normalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    if not weights_fp32:
        weights = weights.to(router_logits.dtype)
    return ids, weights


def is_small_step(num_tokens: int, top_k: int, expert_bytes: int) -> bool:
    entries = num_tokens * top_k
    return entries <= GATHER_MAX_ENTRIES and entries * expert_bytes <= GATHER_LIMIT_BYTES


@dataclass
class Dispatch:
    """Plan of one large layer-step: its (token, k) entries grouped by expert, ascending. Planned on the host
    (plan_dispatch: `experts` and `bounds`, what a pager needs to fetch the step's experts; one host sync per
    layer-step) or on the device (plan_on_device: `expert_bounds`, nothing read back, for providers whose layer's
    experts are all rows of one table). Both give the same entries in the same order."""

    tokens: torch.Tensor  # [T*K] token row of each grouped entry
    weights: torch.Tensor  # [T*K] routing weight of each grouped entry
    position: torch.Tensor  # [T, K] where entry (t, k) sits among the grouped entries
    num_experts: int | None = None  # E of the layer, where the planner knows it (what the grouped GEMM's rule reads)
    experts: np.ndarray | None = None  # [U] unique expert ids, ascending (host plans)
    bounds: np.ndarray | None = None  # [U + 1] expert u owns grouped entries bounds[u]:bounds[u+1] (host plans)
    expert_bounds: torch.Tensor | None = None  # [E + 1] on the device: expert e owns entries [e]:[e+1] (device plans)
    tiles: torch.Tensor | None = None  # the grouped GEMM's row tiles of tile_rows rows, where the device plan made them
    tile_rows: int | None = None

    def span(self, u: int) -> slice:
        return slice(int(self.bounds[u]), int(self.bounds[u + 1]))


def plan_dispatch(ids_host: np.ndarray, weights: torch.Tensor, num_experts: int | None = None) -> Dispatch:
    """ids_host [T, K] (already on the host: one sync per layer-step), weights [T, K] on the device."""
    top_k = ids_host.shape[1]
    flat = ids_host.reshape(-1)
    order = np.argsort(flat, kind="stable")  # stable: tokens stay ascending within an expert
    experts, starts = np.unique(flat[order], return_index=True)
    position = np.empty_like(order)
    position[order] = np.arange(order.size)
    index = to_device(np.stack([order // top_k, position, order]), weights.device)  # [3, T*K]: one copy
    return Dispatch(tokens=index[0], weights=weights.reshape(-1)[index[2]], position=index[1].view(ids_host.shape),
                    num_experts=num_experts, experts=experts, bounds=np.append(starts, flat.size))


def plan_on_device(ids: torch.Tensor, weights: torch.Tensor, num_experts: int,
                   tile_rows: int | None = None) -> Dispatch:
    """plan_dispatch's entries computed where ids [T, K] are (a stable sort, so the same order), with each expert
    id's span bounds instead of the host's list of experts: no host sync. Where Triton runs (CUDA, or its
    interpreter) a counting sort in three launches (engine.experts.routing.device_plan), which also lists the
    grouped GEMM's tiles of tile_rows rows when given; elsewhere torch's sort."""
    if runs_plan_kernels(ids):
        from engine.experts.routing import device_plan

        tokens, grouped_weights, position, bounds, tiles = device_plan.plan(ids, weights, num_experts, tile_rows)
        return Dispatch(tokens=tokens, weights=grouped_weights, position=position, num_experts=num_experts,
                        expert_bounds=bounds, tiles=tiles, tile_rows=tile_rows)
    top_k = ids.shape[1]
    ranked, order = torch.sort(ids.reshape(-1), stable=True)
    bounds = torch.searchsorted(ranked, torch.arange(num_experts + 1, device=ids.device, dtype=ranked.dtype))
    position = torch.argsort(order)  # the inverse permutation
    return Dispatch(tokens=order // top_k, weights=weights.reshape(-1)[order], position=position.view(ids.shape),
                    num_experts=num_experts, expert_bounds=bounds)


def runs_plan_kernels(ids: torch.Tensor) -> bool:
    """plan_on_device runs engine.experts.routing.device_plan's kernels: Triton on CUDA (or its interpreter on the
    CPU)."""
    return (HAS_TRITON
            and (ids.is_cuda or os.environ.get("TRITON_INTERPRET") == "1"))


def to_device(host: np.ndarray, device: torch.device) -> torch.Tensor:
    """A host array on the device without a host sync: on CUDA through pinned memory, a copy queued on the stream
    (torch's pinned allocator keeps the staging buffer until the copy has run); elsewhere the array itself.
    A pageable copy would wait for every kernel queued before it, once per layer-step."""
    tensor = torch.from_numpy(host)
    if device.type != "cuda":
        return tensor
    return tensor.pin_memory().to(device, non_blocking=True)


def start_layer(x: torch.Tensor, ids_host, weights: torch.Tensor,
                num_experts: int | None = None) -> tuple[Dispatch, torch.Tensor]:
    """Plan a large layer-step from the routed ids already on the host, and gather its [T*K, D] buffer: the token
    row of every (token, k) entry, grouped by expert as the plan lists them. Each expert then overwrites its own
    span with its outputs (ExpertLayout.run_expert): one gather per layer-step, not one per expert."""
    dispatch = plan_dispatch(ids_host, weights, num_experts)
    return dispatch, x[dispatch.tokens]


def start_layer_on_device(x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor, num_experts: int,
                          tile_rows: int | None = None) -> tuple[Dispatch, torch.Tensor]:
    """start_layer planned on the device (plan_on_device, with the grouped GEMM's tiles of tile_rows rows where
    given): the same gathered buffer, no host sync."""
    dispatch = plan_on_device(ids, weights, num_experts, tile_rows)
    return dispatch, x[dispatch.tokens]


def combine_grouped(out: torch.Tensor, dispatch: Dispatch, ids: torch.Tensor) -> torch.Tensor:
    """out [T*K, D] with entries grouped by expert -> [T, D], summed exactly as combine() sums."""
    if out.is_cuda and HAS_TRITON:  # the same adds, read in place, in one kernel
        from engine.experts.routing.ranked_sum import ranked_sum

        return ranked_sum(out, ids, dispatch.position)
    order = torch.argsort(ids, dim=-1)  # [T, K]
    return sum_ranked(out[dispatch.position.gather(1, order)])


def combine(out: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Sum out [T, K, D] over K in ascending expert-id order per token -> [T, D]."""
    if out.is_cuda and HAS_TRITON:  # the same adds as below in one kernel
        from engine.experts.routing.ranked_sum import ranked_sum

        return ranked_sum(out, ids)
    order = torch.argsort(ids, dim=-1)  # [T, K]
    return sum_ranked(out.gather(1, order[:, :, None].expand_as(out)))


def sum_ranked(ranked: torch.Tensor) -> torch.Tensor:
    """[T, K, D] already in ascending expert-id order per token -> [T, D], added one k at a time."""
    total = torch.zeros_like(ranked[:, 0])
    for k in range(ranked.shape[1]):
        total = total + ranked[:, k]
    return total
