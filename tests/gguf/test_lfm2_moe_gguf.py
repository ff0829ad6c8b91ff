"""LFM2-MoE GGUF files (llama.cpp's lfm2moe), written by `wisp convert-gguf` from a tiny checkpoint that
transformers' own class wrote: llama.cpp loads them and Wisp's engine computes llama.cpp's logits at f32 (short-conv
layers with their [D, K] f32 kernels, attention layers told apart by their KV heads, per-head q/k norms, the dense
first layer, the sigmoid router's expert bias as exp_probs_b, the final norm as token_embd_norm) and the checkpoint's
own logits and tokens; a file that llama.cpp's quantizer made Q4_K_M reads as llama.cpp computes its weights; the
converter refuses what llama.cpp's graph fixes."""

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest
import torch

from engine.errors import UnsupportedModelError
from engine.gguf.convert import convert
from engine.gguf.info import read_info
from engine.gguf.model_file import GgufModel
from engine.model.loader import read_args
from tests.gguf.engine_logits import agreement, file_logits
from tests.gguf.engine_runs import outputs
from tests.gguf.reference import dequantized_copy, llama_cpp_logits

MODEL_TYPE = "lfm2_moe"
TOKENS = np.random.default_rng(0).integers(3, 384, 64).tolist()


def test_the_file_holds_what_llama_cpp_reads(gguf_files):
    model = GgufModel(gguf_files.converted(MODEL_TYPE, "f32"))
    assert model.architecture == "lfm2moe" and model.support()[0]
    assert model.file.get("lfm2moe.attention.head_count_kv") == [0, 2, 0, 0]
    assert model.file.get("lfm2moe.shortconv.l_cache") == 3 and model.file.get("lfm2moe.expert_gating_func") == 2
    assert model.file.get("lfm2moe.leading_dense_block_count") == 1
    tensors = model.file.tensors
    conv = tensors["blk.0.shortconv.conv.weight"]
    assert conv.shape == (256, 3) and conv.type_name == "F32"
    assert {"token_embd_norm.weight", "blk.1.exp_probs_b.bias", "blk.1.attn_q_norm.weight"} <= set(tensors)
    assert "output_norm.weight" not in tensors
    assert replace(model.args, extra={}) == replace(read_args(gguf_files.folder(MODEL_TYPE)), extra={})
    assert read_info(model.path).kv_bytes_per_token == 1 * 2 * (64 + 64) * 2  # the attention layer's f16 K and V


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


@pytest.mark.parametrize("change, message", [({"routed_scaling_factor": 1.5}, "does not scale"),
                                             ({"norm_topk_prob": False}, "renormalises"),
                                             ({"conv_bias": True}, "conv biases")])
def test_a_checkpoint_llama_cpp_would_compute_differently_is_refused(change, message, gguf_files, tmp_path):
    folder = tmp_path / "changed"
    shutil.copytree(gguf_files.folder(MODEL_TYPE), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(UnsupportedModelError, match=message):
        convert(folder, tmp_path / "changed.gguf")
