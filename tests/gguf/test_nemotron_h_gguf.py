"""Nemotron-H MoE GGUF files (llama.cpp's nemotron_h_moe), written by `wisp convert-gguf` from a tiny checkpoint
that transformers' own class wrote: llama.cpp loads them and Wisp's engine computes llama.cpp's logits at f32 (Mamba-2
blocks with ssm_a = -exp(A_log), the grouped gated norm and the f32 conv kernel; attention without RoPE; the latent
MoE with ungated ReLU² experts, the shared expert and grouped sigmoid routing) and the checkpoint's own logits and
tokens; a file that llama.cpp's quantizer made Q4_K_M reads as llama.cpp computes its weights; the converter refuses
the dense MLP blocks llama.cpp's loader cannot hold."""

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest
import torch

from engine.errors import UnsupportedModelError
from engine.gguf.convert import convert
from engine.gguf.model_file import GgufModel
from engine.model.loader import read_args
from tests.gguf.engine_logits import agreement, file_logits
from tests.gguf.engine_runs import outputs
from tests.gguf.reference import dequantized_copy, llama_cpp_logits

MODEL_TYPE = "nemotron_h"
TOKENS = np.random.default_rng(0).integers(3, 384, 64).tolist()


def test_the_file_holds_what_llama_cpp_reads(gguf_files):
    model = GgufModel(gguf_files.converted(MODEL_TYPE, "f32"))
    assert model.architecture == "nemotron_h_moe" and model.support()[0]
    get = lambda key: model.file.get(f"nemotron_h_moe.{key}")  # noqa: E731
    assert get("attention.head_count_kv") == [0, 0, 2, 0, 0] and get("feed_forward_length") == [0, 256, 0, 0, 256]
    assert (get("ssm.inner_size"), get("ssm.time_step_rank"), get("ssm.group_count"), get("moe_latent_size")) == (
        256, 8, 2, 256)
    tensors = model.file.tensors
    assert tensors["blk.0.ssm_a"].shape == (8, 1) and tensors["blk.0.ssm_norm.weight"].shape == (2, 128)
    conv = tensors["blk.0.ssm_conv1d.weight"]
    assert conv.shape == (320, 4) and conv.type_name == "F32"
    assert {"blk.1.ffn_up_exps.weight", "blk.1.ffn_latent_down.weight", "blk.1.exp_probs_b.bias"} <= set(tensors)
    assert "blk.1.ffn_gate_exps.weight" not in tensors
    a_log = model.dense_tensors()["layers.0.mixer.A_log"].dequantize()
    ssm_a = torch.from_numpy(np.frombuffer(model.file.raw("blk.0.ssm_a"), np.float32).copy())
    assert torch.allclose(-a_log.exp(), ssm_a)
    ours, theirs = model.args, read_args(gguf_files.folder(MODEL_TYPE))
    # the file keeps no Mamba chunk size (a way of computing the scan) nor the unused dense MLP width
    assert replace(ours, extra={}) == replace(theirs, mamba=replace(theirs.mamba, chunk_size=128), intermediate_size=0)


def test_an_f32_file_computes_llama_cpps_and_the_checkpoints_logits(gguf_files):
    from transformers import AutoModelForCausalLM

    path = gguf_files.converted(MODEL_TYPE, "f32")
    ours = file_logits(path, TOKENS)
    top1, kl = agreement(ours, llama_cpp_logits(path, TOKENS))
    assert top1 == 1.0 and kl < 1e-6, (top1, kl)
    with torch.inference_mode():
        reference = AutoModelForCausalLM.from_pretrained(gguf_files.folder(MODEL_TYPE), dtype=torch.float32)(
            torch.tensor([TOKENS]))
    assert np.abs(ours - reference.logits[0].numpy()).max() < 1e-4


def test_an_f32_file_generates_its_checkpoints_tokens(gguf_files):
    reference = outputs(gguf_files.folder(MODEL_TYPE), max_tokens=4)
    ours = outputs(gguf_files.converted(MODEL_TYPE, "f32"), max_tokens=4)
    assert len({ids for ids, _ in reference}) > 1
    assert [ids for ids, _ in ours] == [ids for ids, _ in reference]


def test_a_q4_k_m_file_reads_as_llama_cpp_computes_its_weights(gguf_files, tmp_path):
    path = gguf_files.quantized(MODEL_TYPE, "Q4_K_M")
    theirs = llama_cpp_logits(dequantized_copy(path, tmp_path / "dequantized.gguf"), TOKENS)
    ours = file_logits(path, TOKENS)
    assert np.abs(ours - theirs).max() < 1e-3 * np.abs(theirs).max()
    assert (ours.argmax(-1) == theirs.argmax(-1)).all()


def test_dense_mlp_blocks_are_refused_by_the_converter(gguf_files, tmp_path):
    folder = tmp_path / "dense"
    shutil.copytree(gguf_files.folder(MODEL_TYPE), folder)
    config = json.loads((folder / "config.json").read_text())
    pattern = {"hybrid_override_pattern": "ME*-E", "layers_block_type": None}
    (folder / "config.json").write_text(json.dumps({**config, **pattern}))
    with pytest.raises(UnsupportedModelError, match="dense MLP"):
        convert(folder, tmp_path / "dense.gguf")
