"""Files llama.cpp's quantizer made in the low-bit types people download to fit a 30B MoE in 8-16 GB (Q3_K_M, Q2_K,
IQ4_XS): a tiny qwen3_moe (tests/gguf/conftest.py's files, rows of 256) runs on Wisp's engine, computes
llama.cpp's logits for its weights, stays close to llama.cpp's own low-bit kernels, and gives the same bits in every
expert mode."""

import numpy as np
import pytest

from engine.gguf.model_file import GgufModel
from tests.gguf.engine_logits import agreement, assert_reads_as_llama_cpp_computes_its_weights, file_logits
from tests.gguf.engine_runs import assert_every_mode_is_bitwise_resident
from tests.gguf.reference import llama_cpp_logits

TOKENS = np.random.default_rng(0).integers(3, 384, 48).tolist()
# file type -> (gate/up type, down types of its two layers), as llama.cpp's quantizer gives them
LOW_BIT = {"Q3_K_M": ("Q3_K", {"Q4_K"}), "Q2_K": ("Q2_K", {"Q3_K"}), "IQ4_XS": ("IQ4_XS", {"IQ4_XS"})}


@pytest.mark.parametrize("ftype", LOW_BIT)
def test_the_file_holds_low_bit_types_and_runs_on_wisp(gguf_files, ftype):
    model = GgufModel(gguf_files.quantized("qwen3_moe", ftype))
    types = model.tensor_types()
    gate_up, downs = LOW_BIT[ftype]
    assert types["blk.0.ffn_gate_exps.weight"] == types["blk.1.ffn_up_exps.weight"] == gate_up
    assert {types["blk.0.ffn_down_exps.weight"], types["blk.1.ffn_down_exps.weight"]} == downs
    assert model.support()[0]


@pytest.mark.parametrize("ftype", LOW_BIT)
def test_the_file_reads_as_llama_cpp_computes_its_weights(gguf_files, ftype, tmp_path):
    assert_reads_as_llama_cpp_computes_its_weights(gguf_files.quantized("qwen3_moe", ftype), TOKENS, tmp_path)


@pytest.mark.parametrize("ftype", LOW_BIT)
def test_llama_cpps_own_kernels_differ_by_its_activation_rounding(gguf_files, ftype):
    """llama.cpp on the quantized file itself multiplies its blocks with activations rounded to 8-bit blocks (Q8_K;
    Q8_0 for IQ4_NL): the test-only reference that rounds Wisp's activations the same way closes the gap (measured
    over 48 positions, KL plain -> rounded: Q3_K_M 0.0064 -> 0.00026, Q2_K 0.0061 -> 1.4e-7, IQ4_XS 0.0061 ->
    0.00022)."""
    path = gguf_files.quantized("qwen3_moe", ftype)
    theirs = llama_cpp_logits(path, TOKENS)
    top1, kl = agreement(file_logits(path, TOKENS), theirs)
    _, rounded_kl = agreement(file_logits(path, TOKENS, rounded=True), theirs)
    assert kl < 0.02 and top1 > 0.85, (top1, kl)
    assert rounded_kl < 0.002 and rounded_kl < kl / 10, (kl, rounded_kl)


# Q3_K_M and Q2_K in the slow step: the modes run every k-quant's expert kernel the same way, and the default run
# holds Q4_K_M, Q5_K_M and Q6_K files (test_wisp_engine_modes.py) and IQ4_XS here
@pytest.mark.parametrize("ftype", [ftype if ftype == "IQ4_XS" else pytest.param(ftype, marks=pytest.mark.slow)
                                   for ftype in LOW_BIT])
def test_every_expert_mode_is_bitwise_resident(gguf_files, ftype):
    assert_every_mode_is_bitwise_resident(gguf_files.quantized("qwen3_moe", ftype))
