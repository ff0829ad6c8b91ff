"""ERNIE 4.5 MoE GGUF files (llama.cpp's ernie4_5-moe), written by `wisp convert-gguf` from a tiny checkpoint that
transformers' own class wrote: llama.cpp loads them and Wisp's engine computes llama.cpp's logits at f32 (RoPE over
adjacent pairs, the dense first layer, the shared experts, the softmax router's correction bias as exp_probs_b) and
the checkpoint's own logits; a file that llama.cpp's quantizer made Q4_K_M reads as llama.cpp computes its weights;
a layout llama.cpp's files cannot hold is refused. (test_model_file and test_convert_gguf cover ernie4_5_moe with the
other architectures.)"""

import json
import shutil

import numpy as np
import pytest
import torch

from engine.errors import UnsupportedModelError
from engine.gguf.convert import convert
from engine.gguf.model_file import GgufModel
from tests.gguf.engine_logits import agreement, file_logits
from tests.gguf.reference import dequantized_copy, llama_cpp_logits

TOKENS = np.random.default_rng(0).integers(3, 384, 64).tolist()


def test_the_file_holds_what_llama_cpp_reads(gguf_files):
    model = GgufModel(gguf_files.converted("ernie4_5_moe", "f32"))
    assert model.architecture == "ernie4_5-moe" and model.support()[0]
    assert model.file.get("ernie4_5-moe.leading_dense_block_count") == 1
    assert model.file.get("ernie4_5-moe.expert_shared_feed_forward_length") == 2 * 256
    assert {"blk.1.exp_probs_b.bias", "blk.1.ffn_gate_shexp.weight", "blk.0.ffn_gate.weight"} <= set(model.file.tensors)
    assert model.args.moe_layers == (False, True, True) and model.args.shared_experts.n_shared_experts == 2
    assert model.args.attention.rope_layout == "interleaved" and model.args.router.kind == "biased_softmax_topk"


def test_an_f32_file_computes_llama_cpps_and_the_checkpoints_logits(gguf_files):
    from transformers import AutoModelForCausalLM

    path = gguf_files.converted("ernie4_5_moe", "f32")
    ours = file_logits(path, TOKENS)
    top1, kl = agreement(ours, llama_cpp_logits(path, TOKENS))
    assert top1 == 1.0 and kl < 1e-6, (top1, kl)
    folder = gguf_files.folder("ernie4_5_moe")
    with torch.inference_mode():
        reference = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)(torch.tensor([TOKENS]))
    assert np.abs(ours - reference.logits[0].numpy()).max() < 1e-4


def test_a_q4_k_m_file_reads_as_llama_cpp_computes_its_weights(gguf_files, tmp_path):
    path = gguf_files.quantized("ernie4_5_moe", "Q4_K_M")
    theirs = llama_cpp_logits(dequantized_copy(path, tmp_path / "dequantized.gguf"), TOKENS)
    ours = file_logits(path, TOKENS)
    assert np.abs(ours - theirs).max() < 1e-3 * np.abs(theirs).max()
    assert (ours.argmax(-1) == theirs.argmax(-1)).all()


def test_dense_layers_between_moe_layers_are_refused_by_the_converter(gguf_files, tmp_path):
    folder = tmp_path / "interval"
    shutil.copytree(gguf_files.folder("ernie4_5_moe"), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "moe_layer_interval": 2}))
    with pytest.raises(UnsupportedModelError, match="cannot hold it"):
        convert(folder, tmp_path / "interval.gguf")
