"""The one-kernel RMSNorm used on CUDA, run in Triton's interpreter: the same values as the op-for-op RMSNorm."""

from __future__ import annotations

import pytest
import torch

from engine.model.layers import RMSNorm

pytest.importorskip("triton", reason="the fused norm needs Triton")  # installed by the test extra


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_rms_norm_matches_the_reference(dtype):
    from engine.model.fused_norm import fused_rms_norm

    norm = RMSNorm(96, 1e-6).to(dtype)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(96))
    x = torch.randn(5, 3, 96).to(dtype)
    expected = norm(x)  # on the CPU the module computes op for op
    got = fused_rms_norm(x, norm.weight.detach(), 1e-6)
    assert got.dtype == dtype and got.shape == x.shape
    if dtype == torch.float32:
        assert torch.allclose(got, expected, rtol=1e-5, atol=1e-6)
    else:  # two bf16 roundings; the interpreter rounds fp32->bf16 by truncation, the GPU to nearest
        assert torch.allclose(got.float(), expected.float(), rtol=2.5e-2, atol=1e-3)
