"""The strongest check of the inverse mapping on quantized files: a transformers model holding a k-quant file's
weights as Wisp maps them computes llama.cpp's logits for the same weights (dequantized to f32 so that
llama.cpp's kernels do not quantize activations), on every architecture."""

import numpy as np
import pytest
import torch

from tests.gguf.reference import dequantized_copy, hf_model_from_gguf, llama_cpp_logits

PROMPT = list(range(5, 69))


@pytest.mark.parametrize("model_type", ["qwen3_moe", "qwen2_moe", "olmoe", "mixtral", "glm4_moe"])
def test_wisps_reading_of_a_q4_k_m_file_computes_llama_cpps_logits(model_type, gguf_files, tmp_path):
    path = gguf_files.quantized(model_type, "Q4_K_M")
    with torch.no_grad():
        reference = hf_model_from_gguf(path, model_type)(torch.tensor([PROMPT])).logits[0].numpy()
    logits = llama_cpp_logits(dequantized_copy(path, tmp_path / "f32.gguf"), PROMPT)
    # float rounding only: llama q/k rows left in llama.cpp's order miss by more than the logits' range
    assert np.abs(logits - reference).max() < 1e-4 * np.abs(reference).max()
    assert (logits.argmax(-1) == reference.argmax(-1)).all()
