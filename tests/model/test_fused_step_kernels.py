"""The decode step's fused norm kernels, in Triton's interpreter on the CPU, against the torch ops they replace: a
residual add and the next RMSNorm (engine.model.fused_add_norm); the per-head q/k RMSNorm, RoPE and
KV-cache write (engine.model.fused_qk_rope)."""

from __future__ import annotations

import pytest
import torch

from engine.model.layers import RMSNorm, RotaryEmbedding, apply_rope

pytest.importorskip("triton", reason="the fused kernels need Triton")  # installed by the test extra
from engine.model.fused_add_norm import fused_add_rms_norm  # noqa: E402

TOLERANCE = {torch.bfloat16: {"atol": 1e-2, "rtol": 2**-7}, torch.float32: {"atol": 1e-6, "rtol": 1e-5}}


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("hidden", [2048, 96])
def test_add_and_norm_as_the_torch_ops(monkeypatch, dtype, hidden):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    generator = torch.Generator().manual_seed(hidden)
    x = (torch.randn(3, hidden, generator=generator) * 4).to(dtype)
    delta = torch.randn(3, hidden, generator=generator).to(dtype)
    norm = RMSNorm(hidden, 1e-6)
    norm.weight.data = (torch.rand(hidden, generator=generator) + 0.5).to(dtype)
    total, normed = fused_add_rms_norm(x, delta, norm.weight.data, 1e-6)
    assert torch.equal(total, x + delta)  # rounded to the dtype as torch's add rounds
    with torch.no_grad():
        torch.testing.assert_close(normed, norm(x + delta), **TOLERANCE[dtype])


def qk_case(dtype, tokens=3, heads=4, kv_heads=2, dim=64, rotary_dim=64):
    generator = torch.Generator().manual_seed(rotary_dim)
    q = (torch.randn(tokens, heads, dim, generator=generator) * 3).to(dtype)
    k = (torch.randn(tokens, kv_heads, dim, generator=generator) * 3).to(dtype)
    v = torch.randn(tokens, kv_heads, dim, generator=generator).to(dtype)
    cos, sin = RotaryEmbedding(rotary_dim, 1e6)(torch.tensor([0, 7, 4000])[:tokens], dtype)
    slots = torch.tensor([5, 0, 9])[:tokens]
    return q, k, v, cos, sin, slots


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("rotary_dim", [64, 32])  # 32 of 64: glm4_moe's partial RoPE
@pytest.mark.parametrize("with_norm", [True, False])
def test_qk_norm_rope_and_cache_write_as_the_torch_ops(monkeypatch, dtype, rotary_dim, with_norm):
    from engine.model.fused_qk_rope import fused_qk_rope_store

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    q, k, v, cos, sin, slots = qk_case(dtype, rotary_dim=rotary_dim)
    q_norm, k_norm = RMSNorm(64, 1e-6), RMSNorm(64, 1e-6)
    q_norm.weight.data = torch.linspace(0.5, 1.5, 64).to(dtype)
    k_norm.weight.data = torch.linspace(1.5, 0.5, 64).to(dtype)
    k_cache, v_cache = torch.full((12, 2, 64), 7.0, dtype=dtype), torch.full((12, 2, 64), 7.0, dtype=dtype)
    out = fused_qk_rope_store(q, k, v, q_norm.weight.data if with_norm else None,
                              k_norm.weight.data if with_norm else None, 1e-6, cos, sin, slots, k_cache, v_cache)
    with torch.no_grad():
        q_ref, k_ref = (q_norm(q), k_norm(k)) if with_norm else (q, k)
    q_ref, k_ref = apply_rope(q_ref, cos, sin), apply_rope(k_ref, cos, sin)
    expected_k, expected_v = torch.full_like(k_cache, 7.0), torch.full_like(v_cache, 7.0)
    expected_k.index_copy_(0, slots, k_ref)
    expected_v.index_copy_(0, slots, v)
    assert torch.equal(v_cache, expected_v)  # values copied, every other slot untouched
    if with_norm:
        torch.testing.assert_close(out, q_ref, **TOLERANCE[dtype])
        torch.testing.assert_close(k_cache, expected_k, **TOLERANCE[dtype])
    else:  # RoPE alone: fused_rope's roundings, so the bits of the torch ops
        assert torch.equal(out, q_ref) and torch.equal(k_cache, expected_k)


@pytest.mark.parametrize("with_norm", [True, False])
def test_q_k_v_as_views_of_one_projection_output_give_the_same_bits(monkeypatch, with_norm):
    """A merged q/k/v projection's output split into views (rows at the merged width's stride, no copies): the
    kernel reads each token at its stride and computes what it does on contiguous tensors."""
    from engine.model.fused_qk_rope import fused_qk_rope_store

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    q, k, v, cos, sin, slots = qk_case(torch.bfloat16)
    merged = torch.cat([t.reshape(3, -1) for t in (q, k, v)], dim=1)  # [T, (H + 2 KVH) hd]
    views = [part.view(3, -1, 64) for part in merged.split([4 * 64, 2 * 64, 2 * 64], dim=1)]
    assert not views[1].is_contiguous()
    weight = torch.linspace(0.5, 1.5, 64).bfloat16() if with_norm else None
    results = []
    for q_in, k_in, v_in in ((q, k, v), views):
        k_cache, v_cache = torch.zeros(12, 2, 64).bfloat16(), torch.zeros(12, 2, 64).bfloat16()
        out = fused_qk_rope_store(q_in, k_in, v_in, weight, weight, 1e-6, cos, sin, slots, k_cache, v_cache)
        results.append((out, k_cache, v_cache))
    for expected, got in zip(*results):
        assert torch.equal(got, expected)


def test_the_fused_step_is_on_wherever_triton_is(monkeypatch):
    from engine.system import triton_support
    from engine.system.triton_support import fused_step

    for installed in (True, False):
        monkeypatch.setattr(triton_support, "HAS_TRITON", installed)
        assert fused_step() is installed
