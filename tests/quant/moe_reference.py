"""A tiny quantized MoE layer computed in float64, the yardstick of the expert-format tests (CPU and GPU)."""

from __future__ import annotations

import numpy as np
import torch

from engine.quant.reference import dequantize_reference

FORMATS = {"Q4_K_M": ("Q4_K", "Q4_K", "Q6_K"), "Q8_0": ("Q8_0",) * 3, "mixed": ("Q5_K", "Q8_0", "BF16"),
           "MXFP4": ("MXFP4",) * 3, "32-element": ("Q5_1", "Q4_1", "Q5_0"),
           "low-bit": ("Q3_K", "Q2_K", "Q3_K"), "IQ4": ("IQ4_XS", "IQ4_NL", "IQ4_XS")}


def dense_experts(layout, parts) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Each expert's raw (gate, up, down) -> float64 matrices (the reference dequantization: bit-exact vs gguf)."""
    specs = (layout.gate, layout.up, layout.down)
    return [tuple(dequantize_reference(torch.from_numpy(raw), spec.qtype).double().numpy()
                  for raw, spec in zip(p, specs)) for p in parts]


def routed(num_tokens: int, num_experts: int, top_k: int = 4, seed: int = 0):
    """-> (ids [T, K] distinct per token, weights [T, K] summing to 1)."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.stack([torch.randperm(num_experts, generator=g)[:top_k] for _ in range(num_tokens)])
    weights = torch.rand(num_tokens, top_k, generator=g)
    return ids, weights / weights.sum(-1, keepdim=True)


def float64_moe(x: torch.Tensor, ids, weights, dense) -> np.ndarray:
    """sum_k w_k * down_k(silu(gate_k x) * up_k x) per token, in float64 -> [T, D]."""
    out = np.zeros((x.shape[0], dense[0][2].shape[0]))
    for t in range(x.shape[0]):
        xt = x[t].double().numpy()
        for k, e in enumerate(ids[t].tolist()):
            gate, up, down = dense[e]
            g, u = gate @ xt, up @ xt
            out[t] += float(weights[t, k]) * (down @ (g / (1 + np.exp(-g)) * u))
    return out


def both_paths(layout, table, x: torch.Tensor, ids: torch.Tensor, weights: torch.Tensor):
    """The layer by the engine's two expert paths: (run_rows: decode's one kernel over all routed rows,
    run_expert per expert then combine_grouped: prefill's grouped path)."""
    from engine.experts.routing.dispatch import combine_grouped, plan_dispatch

    small = layout.run_rows(x, table, ids.reshape(-1), ids, weights)
    dispatch = plan_dispatch(ids.cpu().numpy(), weights)
    out = x[dispatch.tokens]
    for u, expert in enumerate(dispatch.experts):
        layout.run_expert(table[int(expert)], dispatch, u, out)
    return small, combine_grouped(out, dispatch, ids)
