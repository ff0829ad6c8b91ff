"""gemma4 on CUDA, run on the H200: `pytest -m gpu tests/gpu/test_gemma4.py`. tests/gpu/test_cuda.py runs the tiny
gemma4 through the shared runner too (bf16 greedy against transformers, expert modes bitwise). They fail (not skip)
without a GPU."""

from __future__ import annotations

import pytest
import torch

from tests.gpu.test_cuda import bf16_model_dir, cuda_outputs  # noqa: F401 (bf16_model_dir is a fixture)

pytestmark = pytest.mark.gpu


def test_cuda_graph_replays_equal_the_eager_static_path(bf16_model_dir):
    """The sandwich layers' finish() and the two RoPE tables inside captured graphs, whole-step and per layer."""
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    folder = bf16_model_dir("gemma4")
    static = cuda_outputs(folder, decode="static")
    assert cuda_outputs(folder, decode="graphs") == static
    assert cuda_outputs(folder, decode="graphs", experts="paged", expert_slots=3) == static
    assert cuda_outputs(folder, decode="graphs", experts="static") == static


@pytest.mark.parametrize("attention", ["triton", "sdpa"])
def test_decode_attention_kernels_keep_the_tokens(bf16_model_dir, attention):
    """The Triton decode kernel (softmax scale 1, sliding window, 16 and 32-wide heads) and SDPA's give the tokens of
    the dynamic path."""
    folder = bf16_model_dir("gemma4")
    ours = cuda_outputs(folder, attention=attention, decode="graphs")
    reference = cuda_outputs(folder, attention="sdpa", decode="dynamic")
    assert [tokens for tokens, _ in ours] == [tokens for tokens, _ in reference]
