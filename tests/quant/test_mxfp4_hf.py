"""gpt-oss's Hugging Face MXFP4 experts repacked into ggml block_mxfp4 rows dequantize to exactly what
transformers' own dequantization (integrations.mxfp4.convert_moe_packed_tensors) gives."""

from __future__ import annotations

import pytest
import torch

from engine.errors import ModelFormatError
from engine.quant.mxfp4_hf import expert_rows, ggml_rows
from engine.quant.reference import dequantize_reference
from engine.quant.types import MXFP4

mxfp4 = pytest.importorskip("transformers.integrations.mxfp4")
E, D, I = 3, 64, 96


def hf_tensors(rows: int, cols: int, seed: int, scale_range=(112, 132)):
    """Random Hugging Face blocks [E, rows, cols / 32, 16] and scales [E, rows, cols / 32]."""
    g = torch.Generator().manual_seed(seed)
    blocks = torch.randint(0, 256, (E, rows, cols // 32, 16), generator=g, dtype=torch.uint8)
    scales = torch.randint(*scale_range, (E, rows, cols // 32), generator=g, dtype=torch.uint8)
    return blocks, scales


def transformers_weight(blocks, scales) -> torch.Tensor:
    """transformers' float32 weight [E, cols, rows] (it stores x @ W), transposed back to [E, rows, cols]."""
    return mxfp4.convert_moe_packed_tensors(blocks, scales, dtype=torch.float32).transpose(1, 2)


def assert_same_values(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Bit-exact up to the sign of zero: transformers' table has -0.0 for nibble 8, ggml's +0 (x + 0.0 makes both
    +0 and changes no other value)."""
    assert actual.shape == expected.shape
    assert torch.equal((actual + 0.0).view(torch.int32), (expected + 0.0).view(torch.int32))


@pytest.mark.parametrize("scale_range", [(112, 132), (0, 256)], ids=["usual", "every-scale"])
def test_repacked_rows_dequantize_as_transformers(scale_range):
    blocks, scales = hf_tensors(D, I, seed=1, scale_range=scale_range)
    rows = ggml_rows(blocks, scales)
    assert rows.shape == (E, D, MXFP4.row_bytes(I))
    assert_same_values(dequantize_reference(rows, MXFP4), transformers_weight(blocks, scales))


def test_gate_and_up_are_the_interleaved_rows():
    gate_up_blocks, gate_up_scales = hf_tensors(2 * I, D, seed=2)
    down_blocks, down_scales = hf_tensors(D, I, seed=3)
    gate, up, down = expert_rows(gate_up_blocks, gate_up_scales, down_blocks, down_scales)
    gate_up = transformers_weight(gate_up_blocks, gate_up_scales)  # [E, 2I, D]
    assert_same_values(dequantize_reference(gate, MXFP4), gate_up[:, 0::2])
    assert_same_values(dequantize_reference(up, MXFP4), gate_up[:, 1::2])
    assert_same_values(dequantize_reference(down, MXFP4), transformers_weight(down_blocks, down_scales))
    assert gate.is_contiguous() and gate.shape == (E, I, MXFP4.row_bytes(D))


def test_mismatched_tensors_are_refused_by_name():
    blocks, scales = hf_tensors(D, I, seed=4)
    with pytest.raises(ModelFormatError, match="down_proj: MXFP4 blocks"):
        ggml_rows(blocks, scales[..., :-1], "down_proj")
    with pytest.raises(ModelFormatError, match="even"):
        expert_rows(blocks[:, :3], scales[:, :3], blocks, scales)
