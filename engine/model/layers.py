"""Dense building blocks shared by every architecture, written to match transformers' numerics op for op."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.model.fused_norm import can_fuse, fused_rms_norm
from engine.model.rope_scaling import Yarn, inverse_frequencies
from engine.system.triton_support import HAS_TRITON, fused_step


class RMSNorm(nn.Module):
    """weight_fp32: multiply by the weight in fp32 and cast after (gpt-oss, whose transformers class keeps norms in
    fp32); otherwise cast first and multiply in the input's dtype (Llama-style)."""

    def __init__(self, size: int, eps: float, weight_fp32: bool = False):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps, self.weight_fp32 = eps, weight_fp32

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.weight_fp32 and can_fuse(x, self.weight):
            return fused_rms_norm(x, self.weight, self.eps)
        input_dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        if self.weight_fp32:
            return (self.weight.float() * x).to(input_dtype)
        return self.weight * x.to(input_dtype)

    def add_forward(self, x: torch.Tensor, delta: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """A residual add and this norm of the sum -> (x + delta, norm(x + delta)); one kernel on CUDA."""
        if (not self.weight_fp32 and fused_step() and can_fuse(x, self.weight) and delta.is_contiguous()
                and delta.dtype == x.dtype and delta.shape == x.shape):
            from engine.model.fused_add_norm import fused_add_rms_norm

            return fused_add_rms_norm(x, delta, self.weight, self.eps)
        x = x + delta
        return x, self(x)


class RotaryEmbedding(nn.Module):
    """cos and sin of each position; with a RoPE scaling (engine.model.rope_scaling) its frequencies and the
    attention factor that multiplies cos and sin."""

    def __init__(self, head_dim: int, theta: float, scaling: Yarn | None = None):
        super().__init__()
        self.attention_factor = 1.0
        if scaling is None:
            inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float) / head_dim))
        else:
            inv_freq, self.attention_factor = inverse_frequencies(scaling, head_dim, theta)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    @staticmethod
    def output_dtype(dtype: torch.dtype) -> torch.dtype:
        """The dtype of cos/sin for a model computing in dtype."""
        return dtype

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions[:, None].float() * self.inv_freq  # [T, hd/2]
        emb = torch.cat((freqs, freqs), dim=-1)  # [T, hd]
        if self.attention_factor != 1.0:
            return (emb.cos() * self.attention_factor).to(dtype), (emb.sin() * self.attention_factor).to(dtype)
        return emb.cos().to(dtype), emb.sin().to(dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def is_fusable_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> bool:
    """engine.model.fused_rope takes x [T, H, hd] with one cos/sin row per token, all of one dtype."""
    return (x.dim() == 3 and cos.dim() == 2 and cos.shape == sin.shape and cos.shape[0] == x.shape[0]
            and cos.shape[1] % 2 == 0 and cos.shape[1] <= x.shape[2] and cos.dtype == sin.dtype == x.dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [T, H, hd]; cos/sin [T, rotary_dim]. Partial RoPE (glm4_moe): only the first rotary_dim channels turn."""
    if x.is_cuda and HAS_TRITON and is_fusable_rope(x, cos, sin):  # the same bits in one kernel
        from engine.model.fused_rope import fused_rope

        return fused_rope(x, cos, sin)
    rotary_dim = cos.shape[-1]
    if rotary_dim < x.shape[-1]:
        return torch.cat((apply_rope(x[..., :rotary_dim], cos, sin), x[..., rotary_dim:]), dim=-1)
    cos, sin = cos[:, None, :], sin[:, None, :]
    return (x * cos) + (rotate_half(x) * sin)


class DenseMLP(nn.Module):
    """SwiGLU MLP: dense layers of Qwen MoE models and the Qwen2-MoE shared expert."""

    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

