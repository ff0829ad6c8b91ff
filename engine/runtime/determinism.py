"""Bitwise-repeatable CUDA kernels, so every expert mode can give the tokens and logprobs of a full-memory run.

Two runs of the same engine on CUDA may differ in the last bits of GEMM and attention results (kernel choice
and reduction splits). torch's deterministic algorithms, with the cuBLAS workspace setting they need (importing
engine sets it), make them repeat; the engine's own decode attention (engine.model.decode_attention) covers the
kernel they leave out. Under this mode index_copy_ and index_put_ sort their indices first (several launches per
call), so the hot paths write with their own kernel or a masked copy instead (engine.model.kv_store,
engine.experts.routing.routing_ring). What this costs and fixes: bench/results/2026-11-29-h200-identity/NOTES.md."""

from __future__ import annotations

import torch


def use_deterministic_kernels(enabled: bool = True) -> None:
    """Process-wide (torch's setting is global). Deterministic cuBLAS also needs CUBLAS_WORKSPACE_CONFIG before
    the process's first cuBLAS call: importing engine sets it. New memory is not NaN-filled (torch's default in
    this mode), which would cost a fill per allocation; `python -m bench.identity --fill-uninitialized` runs
    with filling on, to show that no step reads memory it did not write."""
    # warn_only: an op without a deterministic CUDA kernel warns instead of failing a user's request.
    torch.use_deterministic_algorithms(enabled, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = False
