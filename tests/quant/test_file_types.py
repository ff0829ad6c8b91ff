"""The types llama.cpp's quantizer gives rows that are not whole blocks of the type it chose (tensor_type_fallback),
at the shapes of the published MoE files that hold them. llama.cpp's own quantizer checks the same rule on a
template: tests/gguf/test_dense_file_types.py."""

import pytest

from engine.errors import UnsupportedModelError
from engine.quant.file_types import expert_types, fallback_type


@pytest.mark.parametrize("kind,row,stored", [("Q4_K", 2048, "Q4_K"), ("Q4_K", 704, "Q5_0"), ("Q5_K", 2688, "Q5_1"),
                                             ("Q3_K", 2688, "Q4_0"), ("Q2_K", 704, "Q4_0"),
                                             ("IQ4_XS", 704, "IQ4_NL"),
                                             ("Q6_K", 1856, "Q8_0"), ("Q8_0", 704, "Q8_0"), ("Q4_K", 80, "F16"),
                                             ("Q8_0", 80, "F16"), ("MXFP4", 2880, "MXFP4")])
def test_fallback_type_is_llama_cpps(kind, row, stored):
    assert fallback_type(kind, row) == stored


def test_gemma_4_and_nemotron_3_nano_q4_k_m_experts():
    gemma = expert_types("Q4_K_M", list(range(30)), 30, 2816, 704)  # rows of 704: moe_intermediate_size
    assert gemma[0] == ("Q4_K", "Q4_K", "Q8_0") and gemma[4] == ("Q4_K", "Q4_K", "Q5_0")
    nemotron = expert_types("Q4_K_M", [1, 7], 52, 2688, 1856)  # hidden 2688 and 1856: neither whole super-blocks
    assert nemotron == {1: ("Q5_0", "Q5_0", "Q8_0"), 7: ("Q5_0", "Q5_0", "Q5_0")}
    with pytest.raises(UnsupportedModelError, match="'IQ2_XXS' is not one of"):
        expert_types("IQ2_XXS", [0], 1, 256, 256)


def test_low_bit_file_types_at_qwen3_30b_a3b():
    """48 layers, hidden 2048, experts of 768: Q3_K_M's down is Q5_K in the first sixteenth of the layers, Q4_K
    after; Q3_K_S's and Q2_K's are Q3_K throughout."""
    layers = list(range(48))
    assert set(expert_types("Q3_K_M", layers, 48, 2048, 768).values()) == {("Q3_K", "Q3_K", "Q5_K"),
                                                                          ("Q3_K", "Q3_K", "Q4_K")}
    assert expert_types("Q3_K_M", layers, 48, 2048, 768)[2] == ("Q3_K", "Q3_K", "Q5_K")
    assert expert_types("Q3_K_M", layers, 48, 2048, 768)[3] == ("Q3_K", "Q3_K", "Q4_K")
    assert set(expert_types("Q3_K_S", layers, 48, 2048, 768).values()) == {("Q3_K",) * 3}
    assert set(expert_types("Q2_K", layers, 48, 2048, 768).values()) == {("Q2_K", "Q2_K", "Q3_K")}
    assert expert_types("Q2_K", [0], 48, 2816, 704)[0] == ("Q2_K", "Q2_K", "Q4_0")  # rows of 704: Q4_0
    iq4 = expert_types("IQ4_XS", layers, 48, 2048, 768)  # down Q5_K in the first eighth
    assert iq4[5] == ("IQ4_XS", "IQ4_XS", "Q5_K") and iq4[6] == ("IQ4_XS",) * 3
    assert expert_types("IQ4_XS", [9], 48, 2688, 1856)[9] == ("IQ4_NL",) * 3  # Nemotron 3 Nano's rows
