"""RoPE as one kernel (engine.model.fused_rope), in Triton's interpreter on the CPU: the same bits as
engine.model.layers.apply_rope's torch ops, for whole and partial rotary widths, in bf16, fp16 and fp32."""

from __future__ import annotations

import pytest
import torch

from engine.model.fused_rope import fused_rope
from engine.model.layers import RotaryEmbedding, apply_rope, is_fusable_rope


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("rotary_dim", [64, 32])  # 32 of 64 channels: glm4_moe's partial RoPE
def test_kernel_has_the_bits_of_the_torch_ops(monkeypatch, dtype, rotary_dim):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    generator = torch.Generator().manual_seed(rotary_dim)
    x = (torch.randn(5, 4, 64, generator=generator) * 3).to(dtype)  # [T, H, hd]
    rope = RotaryEmbedding(rotary_dim, 10000.0, None)
    cos, sin = rope(torch.tensor([0, 1, 7, 300, 4095]), dtype)
    assert is_fusable_rope(x, cos, sin)
    assert torch.equal(fused_rope(x, cos, sin), apply_rope(x, cos, sin))  # CPU tensors: the torch ops
