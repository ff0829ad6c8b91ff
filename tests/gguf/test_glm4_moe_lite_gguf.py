"""GLM-4.7-Flash GGUF files (llama.cpp's deepseek2), written by `wisp convert-gguf` from a tiny checkpoint that
transformers' own class wrote: kv_b_proj split into attn_k_b and attn_v_b as llama.cpp's converter splits it and
joined back by Wisp's reader; llama.cpp loads the file and Wisp's engine computes llama.cpp's logits at f32 (MLA with
a q LoRA, RoPE over adjacent pairs, the dense first layer, the sigmoid router's correction bias as exp_probs_b, the
shared expert) and the checkpoint's own logits and tokens; a file that llama.cpp's quantizer made Q4_K_M (attn_k_b
falls back to Q5_0, whose rows are too short for k-quants) reads as llama.cpp computes its weights; a file holding
kv_b whole (older files) reads the same; a deepseek2 file that routes with softmax scores (DeepSeek-V2's) is refused
by the family that reads the architecture's sigmoid files; the converter refuses what the graph fixes. The logits and
tokens against llama.cpp and the checkpoint: test_gguf_agreement.py."""

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest
import torch

from engine.errors import UnsupportedModelError
from engine.gguf.convert import convert
from engine.gguf.model_file import GgufModel
from engine.gguf.weights import load_gguf_weights
from engine.model.checkpoint import Checkpoint
from engine.model.families import family
from engine.model.families.mla_gguf import join_kv_b
from engine.model.loader import hf_name, read_args
from tests.gguf.engine_logits import file_logits
from tests.gguf.reference import dequantized_copy, llama_cpp_logits
from tests.gguf.vocabs import rewrite_gguf

MODEL_TYPE = "glm4_moe_lite"
TOKENS = np.random.default_rng(0).integers(3, 384, 64).tolist()


def test_the_file_holds_what_llama_cpp_reads(gguf_files):
    model = GgufModel(gguf_files.converted(MODEL_TYPE, "f32"))
    assert model.architecture == "deepseek2" and model.support()[0]
    get = lambda key: model.file.get(f"deepseek2.{key}")  # noqa: E731
    assert (get("attention.head_count_kv"), get("attention.key_length"), get("attention.value_length")) == (1, 288, 256)
    assert (get("attention.key_length_mla"), get("attention.value_length_mla")) == (96, 64)
    assert (get("attention.kv_lora_rank"), get("attention.q_lora_rank"), get("rope.dimension_count")) == (256, 256, 32)
    assert (get("expert_gating_func"), get("leading_dense_block_count"), get("expert_shared_count")) == (2, 1, 1)
    tensors = model.file.tensors
    assert tensors["blk.1.attn_k_b.weight"].shape == (4, 256, 64)  # [H, kv_lora_rank, qk_nope]
    assert tensors["blk.1.attn_v_b.weight"].shape == (4, 64, 256)  # [H, v_head_dim, kv_lora_rank]
    assert "blk.1.attn_kv_b.weight" not in tensors and "blk.1.exp_probs_b.bias" in tensors
    assert replace(model.args, extra={}) == replace(read_args(gguf_files.folder(MODEL_TYPE)), extra={})


def test_the_weights_of_an_f32_file_are_the_checkpoints(gguf_files):
    folder = gguf_files.folder(MODEL_TYPE)
    weights = load_gguf_weights(gguf_files.converted(MODEL_TYPE, "f32"), torch.float32)
    names, ckpt = family(MODEL_TYPE).weight_names, Checkpoint(folder)
    for param, tensor in weights.state_dict.items():
        assert torch.equal(tensor, ckpt.get(hf_name(param, names))), param  # kv_b_proj joined back bit for bit


def test_a_q4_k_m_file_reads_as_llama_cpp_computes_its_weights(gguf_files, tmp_path):
    path = gguf_files.quantized(MODEL_TYPE, "Q4_K_M")
    assert GgufModel(path).tensor_types()["blk.1.attn_k_b.weight"] not in ("F32", "Q4_K")  # a fallback type, joined
    theirs = llama_cpp_logits(dequantized_copy(path, tmp_path / "dequantized.gguf"), TOKENS)
    ours = file_logits(path, TOKENS)
    assert np.abs(ours - theirs).max() < 1e-3 * np.abs(theirs).max()
    assert (ours.argmax(-1) == theirs.argmax(-1)).all()


def test_a_file_holding_kv_b_whole_reads_the_same(gguf_files, tmp_path):
    path = gguf_files.converted(MODEL_TYPE, "f32")
    args = GgufModel(path).args

    def tensors(reader):
        by_name = {t.name: np.asarray(t.data) for t in reader.tensors}
        for tensor in reader.tensors:
            name = tensor.name
            if name.endswith("attn_k_b.weight"):
                parts = [by_name[name], by_name[name.replace("attn_k_b", "attn_v_b")]]
                yield name.replace("attn_k_b", "attn_kv_b"), join_kv_b(args, parts), tensor.tensor_type
            elif not name.endswith("attn_v_b.weight"):
                yield name, by_name[name], tensor.tensor_type

    whole = rewrite_gguf(path, tmp_path / "whole.gguf", tensors=tensors)
    assert "blk.1.attn_kv_b.weight" in GgufModel(whole).file.tensors and GgufModel(whole).support()[0]
    assert np.array_equal(file_logits(whole, TOKENS[:16]), file_logits(path, TOKENS[:16]))


def test_a_deepseek2_file_routing_with_softmax_is_refused_by_name(gguf_files, tmp_path):
    import gguf

    path = gguf_files.converted(MODEL_TYPE, "f32")
    softmax = rewrite_gguf(path, tmp_path / "softmax.gguf", keep=lambda key: key != "deepseek2.expert_gating_func",
                           add=lambda writer, fields: writer.add_expert_gating_func(gguf.ExpertGatingFuncType.SOFTMAX))
    supported, reason = GgufModel(softmax).support()
    assert not supported and "expert_gating_func 2" in reason and "deepseek2 (glm4_moe_lite)" in reason


@pytest.mark.parametrize("change, message", [({"rope_interleave": False}, "adjacent pairs"),
                                             ({"attention_bias": True}, "attention biases"),
                                             ({"mlp_layer_types": ["dense", "sparse", "dense"]}, "leading dense")])
def test_a_checkpoint_llama_cpp_would_compute_differently_is_refused(change, message, gguf_files, tmp_path):
    folder = tmp_path / "changed"
    shutil.copytree(gguf_files.folder(MODEL_TYPE), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(UnsupportedModelError, match=message):
        convert(folder, tmp_path / "changed.gguf")
