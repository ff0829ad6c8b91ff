"""The RoPE layouts a model's ModelArgs.attention.rope_layout names: "half" (rotate_half, engine.model.layers) and
DeepSeek's two, written to match transformers op for op.

deepseek_v3 (rope_interleave) rotates interleaved pairs (x0, x1), (x2, x3), ... and writes the rotated evens
then odds; deepseek_v2 does the same rotation as a complex product in fp32 (torch.polar angles), whose bits
differ from cos/sin, so its rotary embedding hands out the polar form's real and imaginary parts in fp32."""

from __future__ import annotations

import torch

from engine.model.layers import RotaryEmbedding, apply_rope


class ComplexRotaryEmbedding(RotaryEmbedding):
    """deepseek_v2: positions [T] -> (real, imag) of the unit rotations, each twice as cos/sin are: [T, rope_dim],
    always fp32. Frequencies and attention factor as RotaryEmbedding's."""

    @staticmethod
    def output_dtype(dtype: torch.dtype) -> torch.dtype:
        return torch.float32

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        freqs = positions[:, None].float() * self.inv_freq  # [T, P/2]
        freqs_cis = torch.polar(torch.ones_like(freqs), freqs) * self.attention_factor
        return torch.cat((freqs_cis.real, freqs_cis.real), -1), torch.cat((freqs_cis.imag, freqs_cis.imag), -1)


def rotate_complex(x: torch.Tensor, real: torch.Tensor, imag: torch.Tensor) -> torch.Tensor:
    """x [T, H, P] (pairs adjacent); real, imag [T, P] (each angle twice) -> x rotated, in x's dtype."""
    half = real.shape[-1] // 2
    pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2).contiguous())  # [T, H, P/2]
    return torch.view_as_real(pairs * torch.complex(real[:, :half], imag[:, :half])[:, None, :]).flatten(2).type_as(x)


def rotate_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x [T, H, P] (pairs adjacent); cos, sin [T, P] (the angles twice) -> rotated evens, then rotated odds."""
    half = cos.shape[-1] // 2
    cos, sin = cos[:, None, :half], sin[:, None, :half]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


# ModelArgs.attention.rope_layout -> the rotation of q and k (x [T, H, P] by the embedding's two [T, P] tables)
ROTATIONS = {"half": apply_rope, "interleaved": rotate_interleaved, "complex": rotate_complex}
# ModelArgs.attention.rope_layout -> the rotary embedding that gives each position's (cos, sin) or (real, imag)
ROTARY_EMBEDDINGS = {"half": RotaryEmbedding, "interleaved": RotaryEmbedding, "complex": ComplexRotaryEmbedding}
