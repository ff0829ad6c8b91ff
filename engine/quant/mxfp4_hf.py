"""gpt-oss's MXFP4 experts as Hugging Face checkpoints store them, repacked at load into ggml's block_mxfp4 rows
(engine.quant.types.MXFP4), the slot format: the same bits, only the bytes move, so the experts stay quantized.

Hugging Face: `*_blocks` uint8 [E, rows, K / 32, 16] and `*_scales` uint8 [E, rows, K / 32] (E8M0) of a matrix
whose rows are output features; in each block, byte b holds element 2b in its low nibble and 2b + 1 in its high.
gate_up_proj's rows interleave gate (even) and up (odd). ggml: a block is its scale byte then 16 bytes, byte j
holding element j in its low nibble and j + 16 in its high (llama.cpp's convert_hf_to_gguf.py repacks the same
way). Both read a nibble as an e2m1 value times 2^(scale - 127)."""

from __future__ import annotations

import torch

from engine.errors import ModelFormatError


def ggml_rows(blocks: torch.Tensor, scales: torch.Tensor, name: str = "experts") -> torch.Tensor:
    """blocks uint8 [..., rows, G, 16], scales uint8 [..., rows, G] -> ggml MXFP4 rows uint8 [..., rows, G * 17]."""
    if blocks.dtype != torch.uint8 or scales.dtype != torch.uint8 or blocks.shape[-1] != 16 \
            or tuple(blocks.shape[:-1]) != tuple(scales.shape):
        raise ModelFormatError(f"{name}: MXFP4 blocks {tuple(blocks.shape)} {blocks.dtype} and scales "
                               f"{tuple(scales.shape)} {scales.dtype} do not match (uint8 [..., G, 16] and [..., G])")
    nibbles = torch.stack([blocks & 0x0F, blocks >> 4], dim=-1).reshape(*blocks.shape[:-1], 32)  # element order
    packed = nibbles[..., :16] | (nibbles[..., 16:] << 4)  # [..., G, 16]
    rows = torch.cat([scales.unsqueeze(-1), packed], dim=-1)  # [..., G, 17]
    return rows.reshape(*rows.shape[:-2], -1)


def expert_rows(gate_up_blocks, gate_up_scales, down_blocks, down_scales):
    """A layer's Hugging Face MXFP4 experts -> ggml rows (gate [E, I, B], up [E, I, B], down [E, D, B'])."""
    gate_up = ggml_rows(gate_up_blocks, gate_up_scales, "gate_up_proj")  # [E, 2I, B]
    down = ggml_rows(down_blocks, down_scales, "down_proj")  # [E, D, B']
    if gate_up.shape[1] % 2:
        raise ModelFormatError(f"gate_up_proj: {gate_up.shape[1]} rows; gate and up interleave, so an even number")
    return gate_up[:, 0::2].contiguous(), gate_up[:, 1::2].contiguous(), down.contiguous()
