"""The prefill flash kernel with sinks and a sliding window (engine.model.sink_flash) on CUDA at gpt-oss-20b's
head shapes (64 query heads, 8 KV heads, head size 64), run on the H200: `pytest -m gpu tests/gpu/test_sink_flash.py`.
In bf16 it is at least as close to the fp32 torch formula as the bf16 torch formula is, and its bits repeat."""

from __future__ import annotations

import pytest
import torch

from engine.model.sink_attention import eager_attention
from engine.model.sink_flash import sink_flash_attention

pytestmark = pytest.mark.gpu

H, KVH, HD = 64, 8, 64


def case(q_len: int, kv_len: int, dtype: torch.dtype, seed: int = 0):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    q = torch.randn(q_len, H, HD, generator=generator, device="cuda").to(dtype)
    k = torch.randn(kv_len, KVH, HD, generator=generator, device="cuda").to(dtype)
    v = torch.randn(kv_len, KVH, HD, generator=generator, device="cuda").to(dtype)
    sinks = (torch.randn(H, generator=generator, device="cuda") * 2).to(dtype)
    return q, k, v, sinks


@pytest.mark.parametrize("window", [128, None])
@pytest.mark.parametrize("q_len, kv_len", [(1000, 1000), (300, 1300)])
def test_bf16_close_to_the_torch_formula_and_repeatable(window, q_len, kv_len):
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    q, k, v, sinks = case(q_len, kv_len, torch.bfloat16)
    scale = HD**-0.5
    exact = eager_attention(q.float(), k.float(), v.float(), scale, sinks.float(), window)
    flash = sink_flash_attention(q, k, v, scale, sinks, window)
    eager_error = (eager_attention(q, k, v, scale, sinks, window).float() - exact).abs().max().item()
    flash_error = (flash.float() - exact).abs().max().item()
    print(f"window {window}, {q_len}/{kv_len}: max error flash {flash_error:.2e}, bf16 torch formula {eager_error:.2e}")
    torch.testing.assert_close(flash.float(), exact, atol=2e-2, rtol=2e-2)
    assert flash_error <= max(eager_error, 1e-2)
    for _ in range(2):
        assert torch.equal(sink_flash_attention(q, k, v, scale, sinks, window), flash)


@pytest.mark.parametrize("window", [128, None])
def test_fp32_matches_the_torch_formula(window):
    q, k, v, sinks = case(300, 1300, torch.float32, seed=1)
    scale = HD**-0.5
    torch.testing.assert_close(sink_flash_attention(q, k, v, scale, sinks, window),
                               eager_attention(q, k, v, scale, sinks, window), atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("window", [128, None])
def test_a_prompt_in_chunks_has_the_bits_of_the_whole(window):
    q, k, v, sinks = case(1300, 1300, torch.bfloat16, seed=2)
    whole = sink_flash_attention(q, k, v, HD**-0.5, sinks, window)
    for start, stop in ((0, 1000), (1000, 1300), (517, 1071)):
        chunk = sink_flash_attention(q[start:stop], k[:stop], v[:stop], HD**-0.5, sinks, window)
        assert torch.equal(chunk, whole[start:stop]), (start, stop)
