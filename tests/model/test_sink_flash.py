"""The prefill flash kernel with sinks and a sliding window (engine.model.sink_flash), in Triton's interpreter on
the CPU: close to the torch formula (engine.model.sink_attention.eager_attention) in fp32, with and without sinks
and a window, for a whole prompt and for a prompt chunk after a cached prefix, over lengths that are not multiples
of the blocks; and the same bits from run to run."""

from __future__ import annotations

import pytest
import torch

from engine.model.sink_attention import eager_attention
from engine.model.sink_flash import sink_flash_attention

H, KVH = 4, 2
BLOCKS = (16, 16)  # several query and key blocks on these small shapes


def case(q_len: int, kv_len: int, head_dim: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(q_len, H, head_dim, generator=generator)
    k = torch.randn(kv_len, KVH, head_dim, generator=generator)
    v = torch.randn(kv_len, KVH, head_dim, generator=generator)
    sinks = torch.randn(H, generator=generator) * 2
    return q, k, v, sinks


@pytest.mark.parametrize("window", [None, 8])
@pytest.mark.parametrize("has_sinks", [True, False])
@pytest.mark.parametrize("q_len, kv_len, head_dim", [(37, 37, 16), (21, 70, 32)])
def test_matches_the_torch_formula(monkeypatch, window, has_sinks, q_len, kv_len, head_dim):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    q, k, v, sinks = case(q_len, kv_len, head_dim)
    sinks = sinks if has_sinks else None
    scale = head_dim**-0.5
    out = sink_flash_attention(q, k, v, scale, sinks, window, blocks=BLOCKS)
    torch.testing.assert_close(out, eager_attention(q, k, v, scale, sinks, window), atol=1e-5, rtol=1e-5)


def test_the_table_blocks_and_strided_queries(monkeypatch):
    """One 64-row block over 70 keys, queries read through a view (as attend_spans slices them)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    q, k, v, sinks = case(40, 70, 16, seed=1)
    wide = torch.zeros(40, H, 24)
    wide[:, :, :16] = q
    out = sink_flash_attention(wide[:, :, :16], k, v, 0.25, sinks, 8)
    torch.testing.assert_close(out, eager_attention(q, k, v, 0.25, sinks, 8), atol=1e-5, rtol=1e-5)


def test_bits_repeat(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    q, k, v, sinks = case(21, 70, 16, seed=2)
    first = sink_flash_attention(q, k, v, 0.25, sinks, None, blocks=BLOCKS)
    assert torch.equal(sink_flash_attention(q, k, v, 0.25, sinks, None, blocks=BLOCKS), first)


@pytest.mark.parametrize("window", [None, 8])
def test_a_prompt_in_chunks_has_the_bits_of_the_whole(monkeypatch, window):
    """Key blocks start at multiples of BLOCK_N whatever the query block, and blocks a row does not reach add
    exactly 0: a row's bits depend on its position, not on which chunk or block it sits in."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    q, k, v, sinks = case(45, 45, 16, seed=3)
    whole = sink_flash_attention(q, k, v, 0.25, sinks, window, blocks=BLOCKS)
    for start, stop in ((0, 13), (13, 30), (30, 45)):
        chunk = sink_flash_attention(q[start:stop], k[:stop], v[:stop], 0.25, sinks, window, blocks=BLOCKS)
        assert torch.equal(chunk, whole[start:stop])
