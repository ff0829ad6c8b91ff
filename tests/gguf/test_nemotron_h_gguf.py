"""Nemotron-H MoE GGUF files (llama.cpp's nemotron_h_moe), written by `wisp convert-gguf` from a tiny checkpoint that
transformers' own class wrote: llama.cpp loads them and Wisp's engine computes llama.cpp's logits at f32 (Mamba-2
blocks with ssm_a = -exp(A_log), the grouped gated norm and the f32 conv kernel; attention without RoPE; the latent
MoE with ungated ReLU² experts, the shared expert and grouped sigmoid routing) and the checkpoint's own logits and
tokens; a file that llama.cpp's quantizer made Q4_K_M reads as llama.cpp computes its weights; the converter refuses
the dense MLP blocks llama.cpp's loader cannot hold. The logits and tokens against llama.cpp and the checkpoint:
test_gguf_agreement.py."""

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

MODEL_TYPE = "nemotron_h"


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


def test_dense_mlp_blocks_are_refused_by_the_converter(gguf_files, tmp_path):
    folder = tmp_path / "dense"
    shutil.copytree(gguf_files.folder(MODEL_TYPE), folder)
    config = json.loads((folder / "config.json").read_text())
    pattern = {"hybrid_override_pattern": "ME*-E", "layers_block_type": None}
    (folder / "config.json").write_text(json.dumps({**config, **pattern}))
    with pytest.raises(UnsupportedModelError, match="dense MLP"):
        convert(folder, tmp_path / "dense.gguf")
