"""The dense tensor types a synthetic benchmark model gets (engine.quant.dense_file_types) are the ones llama.cpp's
own quantizer gives the same model: checked on tiny files it quantized, every architecture and file type, and on a
two-layer template of the Qwen3-30B-A3B topology (128 experts) at narrow width."""

from dataclasses import replace

import pytest

from engine.gguf.model_file import GgufModel
from engine.gguf.weights import param_types
from engine.model.model_tree import meta_model
from engine.model.shapes import shape
from engine.quant.dense import KEPT_TYPES
from engine.quant.dense_file_types import dense_types
from tests.gguf.models import quantize

LOW_BIT = ("Q3_K_M", "Q3_K_S", "Q2_K", "IQ4_XS")

CASES = [(m, f) for m in ("qwen3_moe", "qwen2_moe", "mixtral", "glm4_moe") for f in ("Q4_K_M", "Q8_0")] + [
    ("qwen3_moe", "Q5_K_M"), ("mixtral", "Q6_K"), ("qwen3_moe", "IQ4_NL")] + [
    (m, f) for m in ("qwen3_moe", "mixtral") for f in LOW_BIT]


def quantized_types(path) -> dict[str, str]:
    """{Wisp parameter: type} of the file's tensors that a quantized layer would hold."""
    model = GgufModel(path)
    return {param: kind for param, kind in param_types(model).items() if kind in KEPT_TYPES}


def check(path, ftype: str) -> None:
    """The dense types, and the routed experts' (engine.quant.file_types.expert_types), are the file's."""
    from engine.quant.file_types import expert_types

    model = GgufModel(path)
    args = model.args
    assert dense_types(ftype, meta_model(args), args) == quantized_types(path)
    moe_layers = [layer for layer, is_moe in enumerate(args.moe_layers) if is_moe]
    stored = model.tensor_types()
    assert {layer: tuple(stored[f"blk.{layer}.ffn_{name}_exps.weight"] for name in ("gate", "up", "down"))
            for layer in moe_layers} == expert_types(ftype, moe_layers, args.num_hidden_layers,
                                                    args.expert_hidden_size, args.moe_intermediate_size)


@pytest.mark.parametrize("model_type,ftype", CASES)
def test_dense_types_are_llama_cpps(model_type, ftype, gguf_files):
    check(gguf_files.quantized(model_type, ftype), ftype)


def test_dense_types_at_the_qwen3_30b_topology_are_llama_cpps(tmp_path):
    pytest.importorskip("llama_cpp", reason="llama.cpp's quantizer makes the template's types")
    from bench.synthetic_gguf import write_template

    args = replace(shape("qwen3-30b-a3b", 2), hidden_size=256, moe_intermediate_size=256, vocab_size=512,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=64, torch_dtype="float16")
    path = quantize(write_template(tmp_path / "t-f16.gguf", args), tmp_path / "t-Q4_K_M.gguf", "Q4_K_M")
    types = quantized_types(path)
    assert types["layers.1.self_attn.v_proj.weight"] == "Q6_K" and types["lm_head.weight"] == "Q6_K"
    check(path, "Q4_K_M")


# the gate/up fallback
FALLBACK_OF = {"Q4_K_M": "Q5_0", "Q5_K_M": "Q5_1", "Q3_K_M": "Q4_0", "Q2_K": "Q4_0", "IQ4_XS": "IQ4_NL"}


@pytest.mark.parametrize("ftype", list(FALLBACK_OF))
def test_types_of_rows_that_are_not_whole_super_blocks_are_llama_cpps(ftype, tmp_path):
    """A hidden size of 288 and experts of 96 (9 and 3 blocks of 32): llama.cpp's quantizer falls back to Q5_0 or
    Q5_1 (and Q8_0 for Q6_K; Q4_0 for Q3_K and Q2_K; IQ4_NL for IQ4_XS), for the experts as for the dense
    tensors."""
    pytest.importorskip("llama_cpp", reason="llama.cpp's quantizer makes the template's types")
    from bench.synthetic_gguf import write_template
    from engine.quant.file_types import expert_types

    args = replace(shape("qwen3-30b-a3b", 2), hidden_size=288, moe_intermediate_size=96, vocab_size=512,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=64, torch_dtype="float16")
    path = quantize(write_template(tmp_path / "t-f16.gguf", args), tmp_path / f"t-{ftype}.gguf", ftype)
    check(path, ftype)
    stored = GgufModel(path).tensor_types()
    wanted = expert_types(ftype, [0, 1], 2, 288, 96)
    for layer, types in wanted.items():
        assert tuple(stored[f"blk.{layer}.ffn_{name}_exps.weight"] for name in ("gate", "up", "down")) == types
    assert {types[0] for types in wanted.values()} == {FALLBACK_OF[ftype]}
    assert {types[2] for types in wanted.values()} <= {"Q5_0", "Q5_1", "Q8_0", "Q4_0", "IQ4_NL"}


# IQ4_XS in the slow step: llama.cpp quantizes the 128-expert template to IQ4_XS far more slowly than to Q2_K
@pytest.mark.parametrize("ftype", ["Q2_K", pytest.param("IQ4_XS", marks=pytest.mark.slow)])
def test_value_types_where_four_query_heads_share_a_kv_head_are_llama_cpps(ftype, tmp_path):
    """attn_v gets more bits at a GQA of 4 or more: Q4_K in Q2_K files (Q3_K below), Q5_K in IQ4_XS ones."""
    pytest.importorskip("llama_cpp", reason="llama.cpp's quantizer makes the template's types")
    from bench.synthetic_gguf import write_template

    args = replace(shape("qwen3-30b-a3b", 2), hidden_size=256, moe_intermediate_size=256, vocab_size=512,
                   num_attention_heads=4, num_key_value_heads=1, head_dim=64, torch_dtype="float16")
    path = quantize(write_template(tmp_path / "t-f16.gguf", args), tmp_path / f"t-{ftype}.gguf", ftype)
    assert quantized_types(path)["layers.1.self_attn.v_proj.weight"] == {"Q2_K": "Q4_K", "IQ4_XS": "Q5_K"}[ftype]
    check(path, ftype)
