"""Interleaved multimodal RoPE (Qwen3-VL, Qwen3.5): positions [3, T] (time, row, column) -> cos, sin [T, rotary_dim].
Rotary pair j turns by the row position where j % 3 == 1 and j < 3 * sections[1], by the column position where
j % 3 == 2 and j < 3 * sections[2], and by the time position otherwise. A text token has three equal positions,
so its cos and sin are those of plain RoPE at that position."""

from __future__ import annotations

import torch

from engine.model.layers import RotaryEmbedding

DEFAULT_SECTIONS = [11, 11, 10]  # transformers' default when the config names none


def section_of_pairs(num_pairs: int, sections: list[int], device) -> torch.Tensor:
    """[num_pairs]: which of the three positions (0 time, 1 row, 2 column) turns each rotary pair."""
    which = torch.zeros(num_pairs, dtype=torch.long, device=device)
    for axis in (1, 2):
        which[axis : 3 * sections[axis] : 3] = axis
    return which


def mrope_cos_sin(rotary: RotaryEmbedding, positions: torch.Tensor, sections: list[int] | None,
                  dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    sections = sections or DEFAULT_SECTIONS
    freqs = positions[..., None].float() * rotary.inv_freq  # [3, T, P/2]
    which = section_of_pairs(freqs.shape[-1], sections, freqs.device)
    freqs = freqs.gather(0, which.expand(1, freqs.shape[1], -1))[0]  # [T, P/2]
    emb = torch.cat((freqs, freqs), dim=-1)
    factor = rotary.attention_factor
    if factor != 1.0:
        return (emb.cos() * factor).to(dtype), (emb.sin() * factor).to(dtype)
    return emb.cos().to(dtype), emb.sin().to(dtype)
