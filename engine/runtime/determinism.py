"""Bitwise-repeatable CUDA kernels, so every expert mode can give the tokens and logprobs of a full-memory run.

On the H200, at the Qwen3-30B-A3B shape cut to 8 layers, two runs of the very same engine gave logprobs that
differed in the 5th-6th digit after 1-50 decode steps (python -m engine.bench.identity): the first differing
part of a step was a layer's attention block, with or without the math SDPA kernel and without
reduced-precision reductions. With torch's deterministic algorithms (and the cuBLAS workspace setting they
need) every arm matched the resident run bit for bit there. At all 48 layers the arms still part from
resident in the last bits after a few steps, again first in an attention block: not solved yet (see
bench/identity_probe.sh). The tiny test models never showed either. Cost on the H200: resident decode at
the Qwen3 shape 82.9 tok/s with these kernels, 104.7 without."""

from __future__ import annotations

import torch


def use_deterministic_kernels(enabled: bool = True) -> None:
    """Process-wide (torch's setting is global). Deterministic cuBLAS also needs CUBLAS_WORKSPACE_CONFIG before
    the process's first cuBLAS call: importing engine sets it. New memory is not NaN-filled (torch's default in
    this mode), which would cost a fill per allocation: the 8-layer identity run with filling on saw no NaN,
    and `engine.bench.identity --fill-uninitialized` checks the whole shape."""
    # warn_only: an op without a deterministic CUDA kernel warns instead of failing a user's request.
    torch.use_deterministic_algorithms(enabled, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = False
