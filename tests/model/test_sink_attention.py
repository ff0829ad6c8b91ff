"""Attention with sinks and a sliding window (gpt-oss): the Triton decode kernel (in Triton's interpreter) and the
eager paths against transformers' eager_attention_forward, and the kernel's bits independent of the padding."""

from __future__ import annotations

import pytest
import torch

from engine.model.decode_attention import decode_attention
from engine.model.sink_attention import MAX_SCORE_ELEMENTS, eager_attention, padded_eager_attention
from tests.model.test_decode_attention import H, KVH, D
from tests.model.test_decode_attention import case as decode_case


def transformers_attention(q, k, v, sinks, window):
    """q [q, H, D] the last q positions of k, v [L, KVH, D], through GptOss's eager attention and its masks."""
    from types import SimpleNamespace

    from transformers.models.gpt_oss.modeling_gpt_oss import eager_attention_forward

    q_len, kv_len = q.shape[0], k.shape[0]
    query_pos = torch.arange(kv_len - q_len, kv_len)[:, None]
    key_pos = torch.arange(kv_len)[None, :]
    allowed = key_pos <= query_pos
    if window is not None:
        allowed &= key_pos > query_pos - window
    mask = torch.zeros(q_len, kv_len).masked_fill(~allowed, torch.finfo(torch.float32).min)
    module = SimpleNamespace(num_key_value_groups=H // KVH, sinks=sinks, training=False)
    out, _ = eager_attention_forward(module, q.transpose(0, 1)[None], k.transpose(0, 1)[None],
                                     v.transpose(0, 1)[None], mask[None, None], D**-0.5)
    return out[0]  # [q, H, D]


def case(seed=0, lengths=(5, 600, 1, 300)):
    """test_decode_attention's case (same head counts) plus a learned sink logit per head."""
    sinks = torch.randn(H, generator=torch.Generator().manual_seed(seed + 1)) * 2
    return (*decode_case(seed, lengths), sinks)


@pytest.mark.parametrize("window", [None, 8, 300])  # 300 with a 600 context: the first chunk is skipped whole
def test_decode_kernel_and_eager_decode_match_transformers(window):
    q, k, v, index, lengths, sinks = case()
    kernel = decode_attention(q, k, v, index, lengths, D**-0.5, window, sinks)
    padded = padded_eager_attention(q, k[index].transpose(1, 2), v[index].transpose(1, 2), lengths, D**-0.5, sinks,
                                    window)
    for row, length in enumerate(lengths.tolist()):
        slots = index[row, :length]
        reference = transformers_attention(q[row : row + 1], k[slots], v[slots], sinks, window)[0]
        torch.testing.assert_close(kernel[row], reference, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(padded[row], reference, atol=1e-5, rtol=1e-5)
        alone = eager_attention(q[row : row + 1], k[slots], v[slots], D**-0.5, sinks, window)
        torch.testing.assert_close(alone[0], reference, atol=1e-5, rtol=1e-5)


def test_kernel_bits_do_not_depend_on_padding_or_batch():
    q, k, v, index, lengths, sinks = case()
    reference = decode_attention(q, k, v, index, lengths, D**-0.5, 300, sinks)
    wider = torch.zeros(len(lengths), 1100, dtype=torch.long)
    wider[:, :640] = index
    assert torch.equal(decode_attention(q, k, v, wider, lengths, D**-0.5, 300, sinks), reference)
    alone = decode_attention(q[1:2], k, v, index[1:2], lengths[1:2], D**-0.5, 300, sinks)
    assert torch.equal(alone[0], reference[1])


@pytest.mark.parametrize("window", [None, 5])
def test_chunked_prefill_matches_transformers(window, monkeypatch):
    """A prompt with a cached prefix, its queries taken a few rows at a time (as a long prompt's are)."""
    import engine.model.sink_attention as sink_attention

    generator = torch.Generator().manual_seed(1)
    q = torch.randn(20, H, D, generator=generator)
    k, v = torch.randn(27, KVH, D, generator=generator), torch.randn(27, KVH, D, generator=generator)
    sinks = torch.randn(H, generator=generator)
    reference = transformers_attention(q, k, v, sinks, window)
    whole = eager_attention(q, k, v, D**-0.5, sinks, window)
    monkeypatch.setattr(sink_attention, "MAX_SCORE_ELEMENTS", 3 * H * 27)  # a few query rows per chunk
    assert 1 < sink_attention.query_rows(H, 27, window) < 20
    chunked = eager_attention(q, k, v, D**-0.5, sinks, window)
    torch.testing.assert_close(whole, reference, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(chunked, reference, atol=1e-5, rtol=1e-5)


def test_prefill_chunks_stay_within_the_score_limit():
    from engine.model.sink_attention import query_rows

    for heads, kv_len, window in [(64, 4096, None), (64, 4096, 128), (64, 100, 128), (4, 10, None), (64, 10**6, None)]:
        rows = query_rows(heads, kv_len, window)
        keys = kv_len if window is None else min(kv_len, rows + window - 1)
        assert rows >= 1 and (rows == 1 or heads * rows * keys <= MAX_SCORE_ELEMENTS)
    assert query_rows(64, 4096, 128) > 4 * query_rows(64, 4096, None)  # sliding layers take longer chunks
