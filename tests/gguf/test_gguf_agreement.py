"""The GGUF files `wisp convert-gguf` writes for each architecture whose llama.cpp layout Wisp owns, from tiny
checkpoints that transformers' own classes wrote: at f32 Wisp's engine computes llama.cpp's logits (llama-cpp-python)
and the checkpoint's own logits and greedy tokens; a file that llama.cpp's quantizer made Q4_K_M reads as llama.cpp
computes its weights. What each architecture's file holds is in its own test_<model_type>_gguf.py."""

import numpy as np
import pytest
import torch

from tests.gguf.engine_logits import agreement, file_logits
from tests.gguf.engine_runs import outputs
from tests.gguf.reference import dequantized_copy, llama_cpp_logits

TOKENS = np.random.default_rng(0).integers(3, 384, 64).tolist()
# model_type -> (the most KL at f32, the largest Q4_K_M difference as a share of llama.cpp's largest logit)
BOUNDS = {
    "minimax_m2": (1e-6, 1e-3),
    "ernie4_5_moe": (1e-6, 1e-3),
    "glm4_moe_lite": (1e-6, 1e-3),
    "lfm2_moe": (1e-6, 1e-3),
    "gemma4_text": (1e-5, 1e-2),  # llama.cpp's CPU GELU reads an f16 table: its logits move by ~1e-3 of their range
    "nemotron_h": (1e-6, 1e-3),
}


@pytest.mark.parametrize("model_type", BOUNDS)
def test_an_f32_file_computes_llama_cpps_and_the_checkpoints_logits(gguf_files, model_type):
    from transformers import AutoModelForCausalLM

    path = gguf_files.converted(model_type, "f32")
    ours = file_logits(path, TOKENS)
    top1, kl = agreement(ours, llama_cpp_logits(path, TOKENS))
    assert top1 == 1.0 and kl < BOUNDS[model_type][0], (top1, kl)
    with torch.inference_mode():
        reference = AutoModelForCausalLM.from_pretrained(gguf_files.folder(model_type), dtype=torch.float32)(
            torch.tensor([TOKENS]))
    assert np.abs(ours - reference.logits[0].numpy()).max() < 1e-4


@pytest.mark.parametrize("model_type", BOUNDS)
def test_an_f32_file_generates_its_checkpoints_tokens(gguf_files, model_type):
    reference = outputs(gguf_files.folder(model_type), max_tokens=4)
    ours = outputs(gguf_files.converted(model_type, "f32"), max_tokens=4)
    assert len({ids for ids, _ in reference}) > 1
    assert [ids for ids, _ in ours] == [ids for ids, _ in reference]


@pytest.mark.parametrize("model_type", BOUNDS)
def test_a_q4_k_m_file_reads_as_llama_cpp_computes_its_weights(gguf_files, tmp_path, model_type):
    path = gguf_files.quantized(model_type, "Q4_K_M")
    theirs = llama_cpp_logits(dequantized_copy(path, tmp_path / "dequantized.gguf"), TOKENS)
    ours = file_logits(path, TOKENS)
    assert np.abs(ours - theirs).max() < BOUNDS[model_type][1] * np.abs(theirs).max()
    assert (ours.argmax(-1) == theirs.argmax(-1)).all()
