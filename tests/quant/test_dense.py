"""Dense GGUF tensors expanded by Wisp's dequantization equal the gguf package's (DenseTensor.dequantize)."""

from __future__ import annotations

import pytest
import torch

from engine.errors import ModelFormatError
from engine.gguf.tensors import DenseTensor
from engine.quant.dense import dequantize_dense
from engine.system.triton_support import HAS_TRITON
from tests.quant.blocks import ALL_TYPES, random_rows

pytest.importorskip("gguf")


@pytest.mark.parametrize("qtype", ALL_TYPES, ids=lambda t: t.name)
def test_matches_the_gguf_reference(qtype):
    raw = random_rows(qtype, 6, 256, seed=3, max_exponent=14)
    tensor = DenseTensor("token_embd.weight", qtype.ggml_id, (6, 256), raw)
    for dtype in (torch.float32, torch.bfloat16):
        assert torch.equal(dequantize_dense(tensor, dtype), tensor.dequantize(dtype))


def test_vectors_and_the_kernel_path(monkeypatch):
    qtype = ALL_TYPES[0]  # F32 norm weights: one row
    raw = random_rows(qtype, 1, 64, seed=4).reshape(-1)
    norm = DenseTensor("output_norm.weight", qtype.ggml_id, (64,), raw)
    assert torch.equal(dequantize_dense(norm, torch.float32), norm.dequantize(torch.float32))
    if HAS_TRITON:
        import engine.quant.linear as linear

        monkeypatch.setattr(linear, "uses_triton", lambda device: True)  # the CUDA path, in Triton's interpreter
        q6 = ALL_TYPES[6]
        tensor = DenseTensor("output.weight", q6.ggml_id, (5, 256), random_rows(q6, 5, 256, seed=5))
        assert torch.equal(dequantize_dense(tensor, torch.bfloat16), tensor.dequantize(torch.bfloat16))


def test_a_short_tensor_is_refused_by_name():
    raw = random_rows(ALL_TYPES[4], 2, 256)[:, :-1]
    with pytest.raises(ModelFormatError, match="blk.0.attn_q.weight"):
        dequantize_dense(DenseTensor("blk.0.attn_q.weight", 12, (2, 256), raw), torch.float32)
