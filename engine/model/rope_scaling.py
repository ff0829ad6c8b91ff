"""RoPE scaling beyond the default rotary embedding: YaRN (gpt-oss, DeepSeek-V2/V3), computed exactly as
transformers' _compute_yarn_parameters (modeling_rope_utils.py) computes it, op for op, so the inverse frequencies
and the attention factor have its bits. The config side (Yarn, parse_yarn) is torch-free in
engine.model.yarn_config."""

from __future__ import annotations

import torch

from engine.model.yarn_config import Yarn, attention_factor, correction_range, parse_yarn, yarn_mscale

__all__ = ["Yarn", "attention_factor", "correction_range", "inverse_frequencies", "parse_yarn", "yarn_mscale"]


def inverse_frequencies(yarn: Yarn, dim: int, base: float):
    """-> (inv_freq [dim/2] fp32 tensor, attention factor) for `dim` rotary dimensions and rope_theta `base`."""
    low, high = correction_range(yarn, dim, base)
    if low == high:
        high += 0.001  # transformers' guard against a zero-width ramp
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = base ** (torch.arange(0, dim, 2).to(dtype=torch.float) / dim)
    extrapolation = 1.0 / pos_freqs
    interpolation = 1.0 / (yarn.factor * pos_freqs)
    extrapolation_factor = 1 - ramp
    inv_freq = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor
    return inv_freq, attention_factor(yarn)
