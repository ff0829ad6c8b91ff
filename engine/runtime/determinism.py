"""Bitwise-repeatable CUDA kernels, so every expert mode can give the tokens and logprobs of a full-memory run.

On the H200, at the Qwen3-30B-A3B shape cut to 8 layers, two runs of the very same engine gave logprobs that
differed in the 5th-6th digit after 1-50 decode steps (python -m engine.bench.identity): the first differing
part of a step was a layer's attention block. torch's deterministic algorithms (and the cuBLAS workspace
setting they need) made every arm match there; at all 48 layers SDPA's decode attention still did not repeat
itself, which the engine's own decode attention (engine.model.decode_attention) fixed: every arm, resident
twice included, then matched bit for bit. The mode's cost was index_copy_ sorting its indices (the KV cache
writes: 82.9 tok/s resident against 104.7 without the mode); the engine writes the cache with its own kernel
now (engine.model.kv_store). A later run measured resident decode at 98.8 tok/s with the mode on and 110.7
with it off (bench/results/2026-11-29-h200-session5): the routing ring still wrote each MoE layer's ids with
index_copy_, one sorting call per layer and step. With a masked copy there: 106.1 on, 105.9 off
(bench/results/2026-11-29-h200-session6)."""

from __future__ import annotations

import torch


def use_deterministic_kernels(enabled: bool = True) -> None:
    """Process-wide (torch's setting is global). Deterministic cuBLAS also needs CUBLAS_WORKSPACE_CONFIG before
    the process's first cuBLAS call: importing engine sets it. New memory is not NaN-filled (torch's default in
    this mode), which would cost a fill per allocation: identity runs with filling on (`engine.bench.identity
    --fill-uninitialized`, 8 and 48 layers) never saw a NaN."""
    # warn_only: an op without a deterministic CUDA kernel warns instead of failing a user's request.
    torch.use_deterministic_algorithms(enabled, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = False
