"""MiniMax-M2 GGUF files (llama.cpp's minimax-m2), written by `wisp convert-gguf` from a tiny checkpoint that
transformers' own class wrote: llama.cpp loads them and Wisp's engine computes llama.cpp's logits at f32 (partial
NEOX RoPE, q/k norms over the full projections, the sigmoid router's correction bias as exp_probs_b) and the
checkpoint's own logits; a file that llama.cpp's quantizer made Q4_K_M reads as llama.cpp computes its weights.
(test_model_file and test_convert_gguf cover minimax_m2 with the other architectures.)"""

import numpy as np
import torch

from engine.gguf.model_file import GgufModel
from tests.gguf.engine_logits import agreement, file_logits
from tests.gguf.reference import dequantized_copy, llama_cpp_logits

TOKENS = np.random.default_rng(0).integers(3, 384, 64).tolist()


def test_the_file_holds_what_llama_cpp_reads(gguf_files):
    model = GgufModel(gguf_files.converted("minimax_m2", "f32"))
    assert model.architecture == "minimax-m2" and model.support()[0]
    assert model.file.get("minimax-m2.rope.dimension_count") == 32
    assert model.file.get("minimax-m2.expert_gating_func") == 2
    assert "blk.1.exp_probs_b.bias" in model.file.tensors and "blk.0.attn_q_norm.weight" in model.file.tensors
    assert model.args.rotary_dim == 32 and model.args.attention.qk_norm == "full" and model.args.router.topk_method == "noaux_tc"


def test_an_f32_file_computes_llama_cpps_and_the_checkpoints_logits(gguf_files):
    from transformers import AutoModelForCausalLM

    path = gguf_files.converted("minimax_m2", "f32")
    ours = file_logits(path, TOKENS)
    top1, kl = agreement(ours, llama_cpp_logits(path, TOKENS))
    assert top1 == 1.0 and kl < 1e-6, (top1, kl)
    folder = gguf_files.folder("minimax_m2")
    with torch.inference_mode():
        reference = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)(torch.tensor([TOKENS]))
    assert np.abs(ours - reference.logits[0].numpy()).max() < 1e-4


def test_a_q4_k_m_file_reads_as_llama_cpp_computes_its_weights(gguf_files, tmp_path):
    path = gguf_files.quantized("minimax_m2", "Q4_K_M")
    theirs = llama_cpp_logits(dequantized_copy(path, tmp_path / "dequantized.gguf"), TOKENS)
    ours = file_logits(path, TOKENS)
    assert np.abs(ours - theirs).max() < 1e-3 * np.abs(theirs).max()
    assert (ours.argmax(-1) == theirs.argmax(-1)).all()
