"""The registry of block types (engine.quant.types): each entry agrees with the gguf package's format table, every
type has the torch reference, and the kernels' tables are what the entries' flags say (the kernels branch on these
codes, so they must not move)."""

import pytest

from engine.gguf.tensors import SUPPORTED_QTYPES
from engine.quant import quant_matmul, reference
from engine.quant.dense import KEPT_TYPES
from engine.quant.types import BLOCK_TYPES, SUPPORTED, quant_type

# The Triton kernels' type codes as their branches read them (triton_kernels, grouped_kernels, gemv kernels).
KERNEL_CODES = {"F32": 0, "F16": 1, "BF16": 2, "Q8_0": 3, "Q4_K": 4, "Q5_K": 5, "Q6_K": 6, "MXFP4": 7, "Q4_0": 8,
                "Q4_1": 9, "Q5_0": 10, "Q5_1": 11, "Q3_K": 12, "Q2_K": 13, "IQ4_NL": 14,
                "IQ4_XS": 15}


@pytest.mark.parametrize("qtype", SUPPORTED, ids=lambda t: t.name)
def test_each_entry_is_the_gguf_packages_format(qtype):
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    ggml = GGMLQuantizationType(qtype.ggml_id)
    assert ggml.name == qtype.name
    assert GGML_QUANT_SIZES[ggml] == (qtype.block_size, qtype.block_bytes)
    assert quant_type(qtype.ggml_id) is qtype and quant_type(qtype.name.lower()) is qtype


def test_names_ids_and_kernel_codes_are_unique_and_fixed():
    assert {t.name: t.kernel_code for t in SUPPORTED} == KERNEL_CODES
    assert len({t.ggml_id for t in SUPPORTED}) == len(SUPPORTED)


def test_every_type_has_the_torch_reference():
    assert set(reference._DEQUANTIZE) == set(SUPPORTED)


def test_the_kernel_tables_derive_from_the_entries():
    from engine.quant.gemv_kernels import WORD_TYPES
    from engine.quant.triton_kernels import TYPE_CODE, tile_shape
    from engine.quant.wide_gemv import WIDE_TYPES

    assert {t.name: code for t, code in TYPE_CODE.items()} == KERNEL_CODES
    assert WORD_TYPES == {"Q8_0": 3, "Q4_K": 4, "Q5_K": 5, "Q6_K": 6}
    assert WIDE_TYPES == {"Q4_K": 4, "Q5_K": 5, "Q6_K": 6}
    assert {t.name: tile_shape(t) for t in SUPPORTED} == {t.name: (16, 16) if t.name in ("Q6_K", "Q3_K", "Q2_K")
                                                          else (8, 32)
                                                          for t in SUPPORTED}


def test_the_loaders_tables_derive_from_the_entries():
    assert SUPPORTED_QTYPES == ("F32", "F16", "BF16", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "MXFP4", "Q4_0", "Q4_1",
                                "Q5_0", "Q5_1", "Q3_K", "Q2_K", "IQ4_NL", "IQ4_XS")
    assert KEPT_TYPES == ("Q8_0", "Q4_K", "Q5_K", "Q6_K", "MXFP4", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q3_K", "Q2_K",
                          "IQ4_NL", "IQ4_XS")
    assert set(quant_matmul.TYPES) == set(BLOCK_TYPES) and all(t.is_quantized for t in BLOCK_TYPES)


def test_an_unsupported_type_is_refused_by_name_with_the_supported_ones():
    with pytest.raises(Exception, match="IQ3_XXS .*Q4_K.*--backend llama.cpp"):
        quant_type(18)  # ggml's IQ3_XXS
