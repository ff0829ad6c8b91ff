"""ERNIE 4.5 MoE GGUF files (llama.cpp's ernie4_5-moe), written by `wisp convert-gguf` from a tiny checkpoint that
transformers' own class wrote: llama.cpp loads them and Wisp's engine computes llama.cpp's logits at f32 (RoPE over
adjacent pairs, the dense first layer, the shared experts, the softmax router's correction bias as exp_probs_b) and
the checkpoint's own logits; a file that llama.cpp's quantizer made Q4_K_M reads as llama.cpp computes its weights; a
layout llama.cpp's files cannot hold is refused. (test_model_file and test_convert_gguf cover ernie4_5_moe with the
other architectures.) The logits and tokens against llama.cpp and the checkpoint: test_gguf_agreement.py."""

import json
import shutil

import pytest

from engine.errors import UnsupportedModelError
from engine.gguf.convert import convert
from engine.gguf.model_file import GgufModel


def test_the_file_holds_what_llama_cpp_reads(gguf_files):
    model = GgufModel(gguf_files.converted("ernie4_5_moe", "f32"))
    assert model.architecture == "ernie4_5-moe" and model.support()[0]
    assert model.file.get("ernie4_5-moe.leading_dense_block_count") == 1
    assert model.file.get("ernie4_5-moe.expert_shared_feed_forward_length") == 2 * 256
    assert {"blk.1.exp_probs_b.bias", "blk.1.ffn_gate_shexp.weight", "blk.0.ffn_gate.weight"} <= set(model.file.tensors)
    assert model.args.moe_layers == (False, True, True) and model.args.shared_experts.n_shared_experts == 2
    assert model.args.attention.rope_layout == "interleaved" and model.args.router.kind == "biased_softmax_topk"


def test_dense_layers_between_moe_layers_are_refused_by_the_converter(gguf_files, tmp_path):
    folder = tmp_path / "interval"
    shutil.copytree(gguf_files.folder("ernie4_5_moe"), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "moe_layer_interval": 2}))
    with pytest.raises(UnsupportedModelError, match="cannot hold it"):
        convert(folder, tmp_path / "interval.gguf")
