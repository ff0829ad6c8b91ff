"""LFM2-MoE GGUF files (llama.cpp's lfm2moe), written by `wisp convert-gguf` from a tiny checkpoint that transformers'
own class wrote: llama.cpp loads them and Wisp's engine computes llama.cpp's logits at f32 (short-conv layers with
their [D, K] f32 kernels, attention layers told apart by their KV heads, per-head q/k norms, the dense first layer,
the sigmoid router's expert bias as exp_probs_b, the final norm as token_embd_norm) and the checkpoint's own logits
and tokens; a file that llama.cpp's quantizer made Q4_K_M reads as llama.cpp computes its weights; the converter
refuses what llama.cpp's graph fixes. The logits and tokens against llama.cpp and the checkpoint:
test_gguf_agreement.py."""

import json
import shutil
from dataclasses import replace

import pytest

from engine.errors import UnsupportedModelError
from engine.gguf.convert import convert
from engine.gguf.info import read_info
from engine.gguf.model_file import GgufModel
from engine.model.loader import read_args

MODEL_TYPE = "lfm2_moe"


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
