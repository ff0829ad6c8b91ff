"""Files whose rows are not whole 256-element super-blocks (tests/gguf/fallback_files.py: a tiny qwen3_moe with a
hidden size of 288 and experts of 96), quantized by llama.cpp into its 32-element fallback types: Wisp's engine runs
them, computes llama.cpp's logits for their weights, and gives the same bits in every expert mode (IQ4_XS files: their
IQ4_NL fallback)."""

import numpy as np
import pytest

from engine.gguf.model_file import GgufModel
from tests.gguf.engine_logits import agreement, assert_reads_as_llama_cpp_computes_its_weights, file_logits
from tests.gguf.engine_runs import assert_every_mode_is_bitwise_resident
from tests.gguf.fallback_files import FALLBACK, fallback_files  # noqa: F401 (the fixture)
from tests.gguf.reference import llama_cpp_logits

TOKENS = np.random.default_rng(0).integers(3, 384, 64).tolist()


@pytest.mark.parametrize("ftype", FALLBACK)
def test_the_file_holds_fallback_types_and_runs_on_wisp(fallback_files, ftype):
    model = GgufModel(fallback_files.quantized("qwen3_moe", ftype))
    types = model.tensor_types()
    assert types["blk.0.ffn_gate_exps.weight"] == types["blk.0.ffn_up_exps.weight"] == FALLBACK[ftype]
    assert {types["blk.0.ffn_down_exps.weight"], types["blk.1.ffn_down_exps.weight"]} <= {FALLBACK[ftype], "Q8_0"}
    assert types["blk.0.attn_q.weight"] == FALLBACK[ftype]  # dense rows of 288 too
    assert model.support()[0]


@pytest.mark.parametrize("ftype", FALLBACK)
def test_the_file_reads_as_llama_cpp_computes_its_weights(fallback_files, ftype, tmp_path):
    assert_reads_as_llama_cpp_computes_its_weights(fallback_files.quantized("qwen3_moe", ftype), TOKENS, tmp_path)


@pytest.mark.parametrize("ftype", FALLBACK)
def test_llama_cpps_own_kernels_differ_by_its_activation_rounding(fallback_files, ftype):
    """llama.cpp on the quantized file itself (its Q5_0, Q5_1 and Q8_0 dot products, activations rounded to Q8_0
    blocks first): the test-only reference that rounds Wisp's activations the same way closes most of the gap
    (measured: Q4_K_M KL 0.0040 -> 0.00029, Q5_K_M 0.013 -> 0.0022; Q5_1's Q8_1 block sums are not reproduced)."""
    path = fallback_files.quantized("qwen3_moe", ftype)
    theirs = llama_cpp_logits(path, TOKENS)
    _, kl = agreement(file_logits(path, TOKENS), theirs)
    _, rounded_kl = agreement(file_logits(path, TOKENS, rounded=True), theirs)
    assert rounded_kl < 0.01 and rounded_kl < kl / 3, (kl, rounded_kl)


# IQ4_XS (IQ4_NL rows) in the slow step: the default run holds the IQ4 blocks through test_low_bit_gguf.py's IQ4_XS
@pytest.mark.parametrize("ftype", ["Q4_K_M", pytest.param("IQ4_XS", marks=pytest.mark.slow)])
def test_every_expert_mode_is_bitwise_resident(fallback_files, ftype):
    assert_every_mode_is_bitwise_resident(fallback_files.quantized("qwen3_moe", ftype))
