"""Gemma 4 GGUF files (llama.cpp's gemma4), written by `wisp convert-gguf` from tiny checkpoints that transformers' own
classes wrote: llama.cpp loads them and Wisp's engine computes llama.cpp's logits at f32 (sliding and wider full
layers with keys as values, the proportional RoPE as rope_freqs, the sandwich norms, the scaled router, the
per-expert scale, the fused gate/up experts, soft-capped tied logits) and the checkpoint's own logits and tokens; a
file that llama.cpp's quantizer made Q4_K_M reads as llama.cpp computes its weights; the vision-language checkpoint
(gemma4) converts to its language model, which gemma4_text reads. llama.cpp's CPU GELU reads a table of f16 inputs
(ggml-cpu/vec.h, GGML_GELU_FP16), so its logits differ from the exact GELU's by ~1e-3 of their range: the agreement
is top-1 and a KL below 1e-5 rather than 1e-6. The logits and tokens against llama.cpp and the checkpoint:
test_gguf_agreement.py."""

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest

from engine.errors import UnsupportedModelError
from engine.gguf.convert import convert
from engine.gguf.model_file import GgufModel
from engine.model.loader import read_args
from tests.gguf.engine_runs import outputs

MODEL_TYPE = "gemma4_text"


def test_the_file_holds_what_llama_cpp_reads(gguf_files):
    model = GgufModel(gguf_files.converted(MODEL_TYPE, "f32"))
    assert model.architecture == "gemma4" and model.support()[0]
    get = lambda key: model.file.get(f"gemma4.{key}")  # noqa: E731
    assert get("attention.head_count_kv") == [2, 2, 1]
    assert get("attention.sliding_window_pattern") == [True, True, False]
    assert (get("attention.key_length"), get("attention.key_length_swa"), get("rope.dimension_count")) == (128, 64, 128)
    assert get("final_logit_softcapping") == 30.0 and get("embedding_length_per_layer_input") == 0
    tensors = model.file.tensors
    factors = np.frombuffer(model.file.raw("rope_freqs.weight"), np.float32)
    assert factors.tolist() == [1.0] * 16 + [np.float32(1e30)] * 48  # a quarter of the 64 pairs turn
    assert tensors["blk.0.ffn_gate_up_exps.weight"].shape == (4, 512, 256)
    assert "blk.0.ffn_gate_exps.weight" not in tensors
    assert {"blk.2.ffn_gate_inp.scale", "blk.2.ffn_down_exps.scale", "blk.2.post_ffw_norm_2.weight"} <= set(tensors)
    assert "blk.2.attn_v.weight" not in tensors and "blk.1.attn_v.weight" in tensors and "output.weight" not in tensors
    assert replace(model.args, extra={}) == replace(read_args(gguf_files.folder(MODEL_TYPE)), extra={})


def test_the_vision_language_checkpoint_converts_to_its_language_model(tiny_model_dir, tmp_path):
    folder = tiny_model_dir("gemma4")
    model = GgufModel(convert(folder, tmp_path / "gemma4.gguf", "f32").path)
    assert model.support()[0] and model.args.model_type == "gemma4_text"
    assert replace(model.args, model_type="gemma4", extra={}) == replace(read_args(folder), extra={})
    reference = outputs(folder, max_tokens=4)
    ours = outputs(model.path, max_tokens=4)
    assert [ids for ids, _ in ours] == [ids for ids, _ in reference]


def test_layers_without_experts_are_refused_by_the_converter(gguf_files, tmp_path):
    folder = tmp_path / "dense"
    shutil.copytree(gguf_files.folder(MODEL_TYPE), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "enable_moe_block": False}))
    with pytest.raises(UnsupportedModelError, match="no experts"):
        convert(folder, tmp_path / "dense.gguf")
