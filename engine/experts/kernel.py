"""The expert compute paths every provider uses (resident, static offload, paged).

Small steps (decode): the routed experts' packed blocks are gathered into one [T*K, numel] buffer and
run as two batched GEMVs: a handful of kernels per layer and no host sync when everything is resident.
Large steps (prefill): the step's token rows are gathered once, grouped by expert, and each expert multiplies
its own span of them and overwrites it with its results (five kernels per expert). The host launches this loop
(48 x 128 experts per Qwen3-30B-A3B prompt), so prefill is bound by launches: on the H200 a 512-token prompt
took 1.65 s with deterministic kernels and 0.74 s without, for milliseconds of GPU work, when each expert
scattered its results (under deterministic algorithms CUDA's sort-based index_put_, ~10 launches); writing
spans instead halved a layer-step (49.9 -> 25.9 ms, bench/prefill_step_probe.py). Which path
runs depends only on the step's shape (tokens, top_k, expert size), never on where experts live, and either
way the (token, k) results are summed per token in ascending expert-id order (transformers' order). So where
an expert's bytes live, and in which group it was fetched, never changes a bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from engine.alloc.memory_plan import GATHER_LIMIT_BYTES, GATHER_MAX_ENTRIES  # the gathered buffer is workspace


def route(router_logits: torch.Tensor, top_k: int, normalize: bool, weights_fp32: bool):
    """Softmax router -> (ids [T, K] long, weights [T, K]); weights in fp32 for Mixtral, else the logits dtype."""
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


def gathered_experts(x: torch.Tensor, blocks: torch.Tensor, weights: torch.Tensor, hidden: int,
                     intermediate: int) -> torch.Tensor:
    """blocks [T*K, numel]: the packed expert of every (token, k) entry. -> weighted outputs [T, K, D]."""
    T, K = weights.shape
    gate_up = blocks[:, : 2 * hidden * intermediate].view(T * K, 2 * intermediate, hidden)
    down = blocks[:, 2 * hidden * intermediate :].view(T * K, hidden, intermediate)
    rows = x.repeat_interleave(K, dim=0)[:, :, None]  # [T*K, D, 1]
    gate, up = torch.bmm(gate_up, rows)[:, :, 0].chunk(2, dim=-1)  # [T*K, I] x2
    y = torch.bmm(down, (F.silu(gate) * up)[:, :, None])[:, :, 0]  # [T*K, D]
    return (y * weights.reshape(-1, 1)).to(x.dtype).view(T, K, hidden)


def run_rows(x: torch.Tensor, table: torch.Tensor, rows: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor,
             hidden: int, intermediate: int) -> torch.Tensor:
    """Small step: entry i of ids [T, K] uses the packed expert table[rows[i]]. -> [T, D] combined."""
    return combine(gathered_experts(x, table[rows], weights, hidden, intermediate), ids)


@dataclass
class Dispatch:
    """Host-side plan of one large layer-step: its (token, k) entries grouped by expert, ascending."""

    experts: np.ndarray  # [U] unique expert ids, ascending
    bounds: np.ndarray  # [U + 1] expert u owns grouped entries bounds[u]:bounds[u+1]
    tokens: torch.Tensor  # [T*K] token row of each grouped entry
    weights: torch.Tensor  # [T*K] routing weight of each grouped entry
    position: torch.Tensor  # [T, K] where entry (t, k) sits among the grouped entries

    def span(self, u: int) -> slice:
        return slice(int(self.bounds[u]), int(self.bounds[u + 1]))


def plan_dispatch(ids_host: np.ndarray, weights: torch.Tensor) -> Dispatch:
    """ids_host [T, K] (already on the host: one sync per layer-step), weights [T, K] on the device."""
    top_k = ids_host.shape[1]
    flat = ids_host.reshape(-1)
    order = np.argsort(flat, kind="stable")  # stable: tokens stay ascending within an expert
    experts, starts = np.unique(flat[order], return_index=True)
    position = np.empty_like(order)
    position[order] = np.arange(order.size)
    index = torch.from_numpy(np.stack([order // top_k, position, order])).to(weights.device)  # [3, T*K]: one copy
    return Dispatch(experts=experts, bounds=np.append(starts, flat.size), tokens=index[0],
                    weights=weights.reshape(-1)[index[2]], position=index[1].view(ids_host.shape))


def run_expert(gate_up, down, dispatch: Dispatch, u: int, out: torch.Tensor) -> None:
    """Compute expert u of the dispatch in place in its span of out [T*K, D] (entries grouped by expert), which
    holds the span's token rows on entry (start_layer gathers them for every expert at once) and the weighted
    outputs on return: five kernels, no gather and no scatter per expert (under deterministic algorithms a
    scatter is CUDA's sort-based index_put_)."""
    span = dispatch.span(u)
    rows = out[span]  # [n, D], contiguous
    gate, up = F.linear(rows, gate_up).chunk(2, dim=-1)  # [n, I] x2: read before rows is overwritten below
    torch.mm(F.silu(gate) * up, down.t(), out=rows)  # F.linear(h, down) without its own buffer: the same GEMM
    rows.mul_(dispatch.weights[span, None])  # as (y * w).to(out.dtype): computed in the wider type


def combine_grouped(out: torch.Tensor, dispatch: Dispatch, ids: torch.Tensor) -> torch.Tensor:
    """out [T*K, D] with entries grouped by expert -> [T, D], summed exactly as combine() sums."""
    order = torch.argsort(ids, dim=-1)  # [T, K]
    return sum_ranked(out[dispatch.position.gather(1, order)])


def combine(out: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Sum out [T, K, D] over K in ascending expert-id order per token -> [T, D]."""
    order = torch.argsort(ids, dim=-1)  # [T, K]
    return sum_ranked(out.gather(1, order[:, :, None].expand_as(out)))


def sum_ranked(ranked: torch.Tensor) -> torch.Tensor:
    """[T, K, D] already in ascending expert-id order per token -> [T, D], added one k at a time."""
    total = torch.zeros_like(ranked[:, 0])
    for k in range(ranked.shape[1]):
        total = total + ranked[:, k]
    return total
