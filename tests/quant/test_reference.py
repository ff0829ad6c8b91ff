"""The torch reference dequantization is bit-exact against the `gguf` package's numpy code for every type."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine.errors import UnsupportedModelError
from engine.quant.reference import dequantize_reference
from engine.quant.types import (BF16, F16, F32, IQ4_NL, IQ4_XS, MXFP4, Q2_K, Q3_K, Q4_0, Q4_1, Q4_K, Q5_0, Q5_1, Q8_0,
                               quant_type)
from tests.quant.blocks import ALL_TYPES, ggml_quantized, gguf_type, random_rows

gguf_quants = pytest.importorskip("gguf.quants")


def assert_bits_equal(actual: torch.Tensor, expected: np.ndarray) -> None:
    expected = torch.from_numpy(np.ascontiguousarray(expected, dtype=np.float32))
    assert actual.dtype == torch.float32 and actual.shape == expected.shape
    assert torch.equal(actual.view(torch.int32), expected.view(torch.int32))


@pytest.mark.parametrize("qtype", ALL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("max_exponent", [30, 14], ids=["any-scale", "small-scale"])
def test_random_blocks_match_gguf(qtype, max_exponent):
    raw = random_rows(qtype, rows=24, cols=512, seed=qtype.ggml_id, max_exponent=max_exponent)
    expected = gguf_quants.dequantize(raw, gguf_type(qtype))
    assert_bits_equal(dequantize_reference(torch.from_numpy(raw), qtype), expected)


@pytest.mark.parametrize("qtype", [F32, F16, BF16, Q8_0], ids=lambda t: t.name)
def test_blocks_quantized_by_gguf_match(qtype):
    weights = np.random.default_rng(1).standard_normal((16, 256), dtype=np.float32) * 0.02
    raw = gguf_quants.quantize(weights, gguf_type(qtype)).view(np.uint8).reshape(16, -1)
    expected = gguf_quants.dequantize(raw, gguf_type(qtype))
    assert_bits_equal(dequantize_reference(torch.from_numpy(raw), qtype), expected)
    assert np.abs(expected - weights).max() < 0.02 * 0.05  # the blocks hold the weights, not noise


@pytest.mark.parametrize("qtype,bits", [(Q4_0, 4), (Q4_1, 4), (Q5_0, 5), (Q5_1, 5)],
                         ids=lambda v: getattr(v, "name", ""))
def test_blocks_quantized_by_gguf_as_32_element_types(qtype, bits):
    weights = np.random.default_rng(3).standard_normal((16, 256), dtype=np.float32) * 0.02
    raw = gguf_quants.quantize(weights, gguf_type(qtype)).view(np.uint8).reshape(16, -1)
    expected = gguf_quants.dequantize(raw, gguf_type(qtype))
    assert_bits_equal(dequantize_reference(torch.from_numpy(raw), qtype), expected)
    blocks_max = np.abs(weights).reshape(-1, 32).max(-1, keepdims=True)
    half_step = blocks_max / 2 ** (bits - 1)  # a step is at most 2 max / (2^bits - 1); rounding moves half of one
    assert (np.abs(expected - weights).reshape(-1, 32) <= half_step).all()


@pytest.mark.parametrize("qtype,bits", [(Q3_K, 3), (Q2_K, 2), (IQ4_NL, 4), (IQ4_XS, 4)],
                         ids=lambda v: getattr(v, "name", ""))
def test_blocks_quantized_by_llama_cpp_as_low_bit_types(qtype, bits):
    weights = np.random.default_rng(4).standard_normal((16, 512), dtype=np.float32) * 0.02
    raw = ggml_quantized(qtype, weights)
    expected = gguf_quants.dequantize(raw, gguf_type(qtype))
    assert_bits_equal(dequantize_reference(torch.from_numpy(raw), qtype), expected)
    error = np.sqrt(np.mean((expected - weights) ** 2)) / 0.02  # relative to the weights' spread
    assert error < 2.0 ** -(bits - 1), error  # the blocks hold the weights, not noise


def test_blocks_quantized_by_gguf_as_mxfp4():
    weights = np.random.default_rng(2).standard_normal((16, 256), dtype=np.float32) * 0.02
    raw = gguf_quants.quantize(weights, gguf_type(MXFP4)).view(np.uint8).reshape(16, -1)
    expected = gguf_quants.dequantize(raw, gguf_type(MXFP4))
    assert_bits_equal(dequantize_reference(torch.from_numpy(raw), MXFP4), expected)
    blocks_max = np.abs(weights).reshape(-1, 32).max(-1, keepdims=True)
    assert (np.abs(expected - weights).reshape(-1, 32) <= blocks_max / 4).all()  # e2m1 steps: the weights, not noise


def test_flat_and_strided_inputs_give_the_same_values():
    raw = torch.from_numpy(random_rows(Q4_K, rows=4, cols=256))
    rows = dequantize_reference(raw, Q4_K)
    assert torch.equal(dequantize_reference(raw.reshape(-1), Q4_K), rows.reshape(-1))
    wide = torch.cat([raw, raw], dim=1)[:, 144:]  # a non-contiguous view
    assert torch.equal(dequantize_reference(wide, Q4_K), rows)


def test_type_table_matches_gguf():
    from gguf.constants import GGML_QUANT_SIZES

    for qtype in ALL_TYPES:
        assert GGML_QUANT_SIZES[gguf_type(qtype)] == (qtype.block_size, qtype.block_bytes)
        assert quant_type(qtype.ggml_id) is qtype and quant_type(qtype.name.lower()) is qtype
    assert Q4_K.row_bytes(2048) == 1152


def test_unsupported_types_are_named():
    with pytest.raises(UnsupportedModelError, match="IQ3_XXS .*not supported"):
        quant_type(18)
    with pytest.raises(UnsupportedModelError, match="IQ2_XXS"):
        quant_type("IQ2_XXS")
    with pytest.raises(UnsupportedModelError, match="whole number"):
        Q4_K.row_bytes(100)
    with pytest.raises(ValueError, match="whole 144-byte blocks"):
        dequantize_reference(torch.zeros(100, dtype=torch.uint8), Q4_K)
