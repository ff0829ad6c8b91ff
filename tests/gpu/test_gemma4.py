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


@pytest.mark.parametrize("kv_heads, head_dim, window", [(8, 256, 1024), (2, 512, None)], ids=["sliding", "full"])
def test_attention_kernels_at_the_26b_a4b_head_sizes(kv_heads, head_dim, window):
    """The Triton decode kernel and the prompt kernel (sliding layers) at gemma-4-26B-A4B's head sizes (16 query
    heads; sliding 8 x 256 with a 1,024-token window, full 2 x 512) and softmax scale 1, against eager attention."""
    from engine.model.decode_attention import decode_attention
    from engine.model.sink_attention import eager_attention
    from engine.model.sink_flash import sink_flash_attention

    generator = torch.Generator(device="cuda").manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=generator, device="cuda", dtype=torch.bfloat16) * 0.1

    context = 1500
    k, v = randn(context, kv_heads, head_dim), randn(context, kv_heads, head_dim)
    q = randn(1, 16, head_dim)
    index, lengths = torch.arange(context, device="cuda")[None], torch.tensor([context], device="cuda")
    decoded = decode_attention(q, k, v, index, lengths, 1.0, window)
    reference = eager_attention(q, k, v, 1.0, None, window)
    assert (decoded.float() - reference.float()).abs().max().item() < 2e-2
    if window is not None:
        prompt = randn(context, 16, head_dim)
        flash = sink_flash_attention(prompt, k, v, 1.0, None, window)
        assert (flash.float() - eager_attention(prompt, k, v, 1.0, None, window).float()).abs().max().item() < 2e-2
