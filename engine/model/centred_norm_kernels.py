"""The zero-centred RMSNorm of the Gated DeltaNet hybrids (engine.model.hybrid_layers.ZeroCenteredRMSNorm) as one
Triton kernel on CUDA (the Triton interpreter runs it on the CPU for tests), alone or with the residual add before
it: op by op it is ~9 launches (the fp32 casts, pow, mean, add, rsqrt, two muls, the cast back) and a hybrid layer's
decode step runs two, plus the add. The arithmetic is the module's: the row in fp32, x * rsqrt(mean(x^2) + eps) times
(offset + weight) in fp32, rounded once to x's dtype; the residual sum rounded to the dtype as torch's add rounds it.
The sum of squares is reduced in another order than torch's mean (a few fp32 ulps). One program per row and no
split reductions: a row's bits do not depend on the other rows, and no shape depends on data (graphable)."""

from __future__ import annotations

import torch

from engine.system.triton_support import fused_step

NO_FUSION = {"enable_fp_fusion": False}  # x * scale * w rounds after each product, as torch's kernels do
_built: dict = {}


def applies(x: torch.Tensor) -> bool:
    """Whether the hybrid layers' zero-centred norms (and GatedAttention's q/k norm with RoPE) on x's device run
    fused kernels: on CUDA where Triton is installed (engine.system.triton_support.fused_step); the CPU keeps the
    torch ops (tests run the kernels there under Triton's interpreter)."""
    return x.is_cuda and fused_step()


def _kernels():
    if not _built:
        import triton

        from engine.model import centred_norm_triton as kernels

        _built.update(norm=kernels.centred_norm_kernel, add_norm=kernels.add_centred_norm_kernel,
                      next_power_of_2=triton.next_power_of_2)
    return _built


def launch_options(k: dict, width: int) -> dict:
    return {"BLOCK": k["next_power_of_2"](width), "num_warps": 4 if width <= 1024 else 8, **NO_FUSION}


def centred_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, offset: float) -> torch.Tensor:
    """x [..., D] contiguous; weight [D] (any float dtype) -> x * rsqrt(mean(x^2) + eps) * (offset + weight)."""
    k = _kernels()
    width = x.shape[-1]
    out = torch.empty_like(x)
    if x.numel():
        k["norm"][(x.numel() // width,)](x, weight, out, width, eps, offset, **launch_options(k, width))
    return out


def add_centred_rms_norm(x: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor, eps: float,
                         offset: float) -> tuple[torch.Tensor, torch.Tensor]:
    """x, delta [..., D] contiguous, of one dtype -> (x + delta, centred_rms_norm(x + delta))."""
    k = _kernels()
    width = x.shape[-1]
    total, out = torch.empty_like(x), torch.empty_like(x)
    if x.numel():
        k["add_norm"][(x.numel() // width,)](x, delta, weight, total, out, width, eps, offset,
                                             **launch_options(k, width))
    return total, out
