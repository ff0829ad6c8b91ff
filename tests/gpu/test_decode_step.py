"""The decode step's kernels on CUDA, run on the H200: `pytest -m gpu tests/gpu/test_decode_step.py`. Fails (not
skips) without a GPU. Decode attention at long contexts (Qwen3-30B-A3B's heads, bf16): the values of an fp32
reference, bits independent of the padding, the batch and repeated runs, with a window and sinks; the link pacing
of `wisp bench --link-gbps`: copies take at least their bytes' time at the paced rate and the tokens stay the same."""

from __future__ import annotations

import pytest
import torch

from engine.system import triton_support
from engine.experts.pager.link_pace import LinkPace
from engine.model.decode_attention import decode_attention

pytestmark = pytest.mark.gpu
H, KVH, D = 32, 4, 128


@pytest.fixture(scope="module")
def cuda():
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    return torch.device("cuda")


def long_case(cuda, lengths=(8192, 700, 1, 5000), width=8704):
    generator = torch.Generator(device=cuda).manual_seed(0)
    slots = len(lengths) * width
    q = torch.randn(len(lengths), H, D, generator=generator, device=cuda).to(torch.bfloat16)
    k = torch.randn(slots, KVH, D, generator=generator, device=cuda).to(torch.bfloat16)
    v = torch.randn(slots, KVH, D, generator=generator, device=cuda).to(torch.bfloat16)
    index = torch.randperm(slots, generator=generator, device=cuda).view(len(lengths), width)
    return q, k, v, index, torch.tensor(lengths, device=cuda)


def reference(q, k, v, index, lengths, window=None, sinks=None):
    """fp32 softmax attention of each row over its own slots (the last `window` positions), with sink logits."""
    out = []
    for row, length in enumerate(lengths.tolist()):
        first = max(0, length - window) if window else 0
        keys, values = k[index[row, first:length]].float(), v[index[row, first:length]].float()  # [L, KVH, D]
        keys, values = keys.repeat_interleave(H // KVH, 1), values.repeat_interleave(H // KVH, 1)  # [L, H, D]
        scores = torch.einsum("hd,lhd->hl", q[row].float(), keys) * D**-0.5
        if sinks is not None:
            scores = torch.cat([scores, sinks.float()[:, None]], 1)
        weights = scores.softmax(-1)[:, : keys.shape[0]]
        out.append(torch.einsum("hl,lhd->hd", weights, values))
    return torch.stack(out)


@pytest.mark.parametrize("window,has_sinks", [(None, False), (128, True), (3000, False)])
def test_long_context_attention_values_and_bits(cuda, window, has_sinks):
    q, k, v, index, lengths = long_case(cuda)
    sinks = torch.randn(H, device=cuda) if has_sinks else None
    out = decode_attention(q, k, v, index, lengths, D**-0.5, window, sinks)
    torch.testing.assert_close(out.float(), reference(q, k, v, index, lengths, window, sinks), atol=2e-2, rtol=2e-2)
    assert torch.equal(decode_attention(q, k, v, index, lengths, D**-0.5, window, sinks), out)  # repeatable
    wider = torch.zeros(len(lengths), 20000, dtype=index.dtype, device=cuda)
    wider[:, : index.shape[1]] = index  # a larger max_model_len pads further
    assert torch.equal(decode_attention(q, k, v, wider, lengths, D**-0.5, window, sinks), out)
    alone = decode_attention(q[3:], k, v, index[3:], lengths[3:], D**-0.5, window, sinks)  # batch of one
    assert torch.equal(alone[0], out[3])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fused_rope_and_expert_sum_have_the_bits_of_the_torch_ops_on_cuda(cuda, dtype):
    from engine.experts.routing.dispatch import combine, sum_ranked
    from engine.model.layers import RotaryEmbedding, apply_rope, rotate_half

    generator = torch.Generator(device=cuda).manual_seed(0)
    x = (torch.randn(7, H, D, generator=generator, device=cuda) * 3).to(dtype)
    for rotary_dim in (D, D // 2):
        cos, sin = RotaryEmbedding(rotary_dim, 1e6).to(cuda)(torch.arange(7, device=cuda) * 999, dtype)
        turned = x[..., :rotary_dim]
        ops = torch.cat([turned * cos[:, None] + rotate_half(turned) * sin[:, None], x[..., rotary_dim:]], -1)
        assert torch.equal(apply_rope(x, cos, sin), ops)
    out = (torch.randn(5, 8, 2048, generator=generator, device=cuda) * 4).to(dtype)
    ids = torch.stack([torch.randperm(128, device=cuda)[:8] for _ in range(5)])
    order = torch.argsort(ids, dim=-1)
    assert torch.equal(combine(out, ids), sum_ranked(out.gather(1, order[:, :, None].expand_as(out))))


def elapsed_ms(fn) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end)


def test_link_pace_waits_for_the_bytes_at_the_paced_rate(cuda):
    pace = LinkPace(1.0, cuda)  # 1 GB/s: a MB takes a millisecond
    host = torch.empty(8 << 20, dtype=torch.uint8).pin_memory()
    device_copy = torch.empty(8 << 20, dtype=torch.uint8, device=cuda)

    def paced_copy():
        pace.begin()
        device_copy.copy_(host, non_blocking=True)
        pace.after_bytes(host.numel())

    paced_copy()
    assert elapsed_ms(paced_copy) >= 8.0
    ids = torch.tensor([3, -1, 0, 7, -1], device=cuda)  # three misses of 2 MB each: 6 ms

    def paced_rows():
        pace.begin()
        pace.after_rows(ids, 2_000_000)

    paced_rows()  # compiles the kernel's COUNT_IDS variant outside the timed span
    assert 6.0 <= elapsed_ms(paced_rows) < 7.5
    with pytest.raises(ValueError, match="positive"):
        LinkPace(0, cuda)


def test_paced_pager_keeps_its_tokens_and_counts_the_paced_time(cuda):
    from engine.bench.suite import decode_once, plan_for
    from engine.bench.synthetic import IdOnlyTokenizer, synthetic_weights
    from engine.config import EngineOptions
    from engine.model.shapes import shape
    from engine.runtime.builder import assemble_engine

    weights = synthetic_weights(shape("qwen3-30b-a3b", num_layers=2), cuda, experts_on_host=True)
    plan = plan_for(weights, "paged", None, 16, batch=1, max_len=1024)  # 16 of 128 slots: misses every step
    runs = {}
    for rate in (None, 2.0):
        engine = assemble_engine(weights, IdOnlyTokenizer(), EngineOptions(device="cuda", experts="paged",
                                                                           max_num_seqs=1), plan, cuda, 1024)
        provider = engine.runner.experts
        if rate is not None:
            provider.pace_link(LinkPace(rate, cuda))
        before = provider.counters.snapshot()
        finish = decode_once(engine, prompt=64, tokens=16, batch=1, seed=0)[0]
        provider.synchronize()
        moved = provider.counters.h2d_bytes - before.h2d_bytes
        runs[rate] = finish, moved
        engine.close()
    (plain, _), (paced, moved) = runs[None], runs[2.0]
    assert moved > 1e9  # the prompt's copies and the decode's misses
    assert paced.token_ids == plain.token_ids and paced.logprobs == plain.logprobs
    assert paced.stats.total_s >= moved / 2e9  # every copied byte at 2 GB/s, one copy after another


@pytest.mark.parametrize("tokens", [1, 3])
def test_fused_norm_kernels_have_the_bits_of_the_kernels_they_replace(cuda, tokens):
    """The add + post-attention norm, and the q/k norm + RoPE + KV write, each one kernel: the same bits as the
    add, fused_rms_norm, fused_rope and store_kv they replace (engine.system.triton_support.fused_step)."""
    from engine.model.fused_add_norm import fused_add_rms_norm
    from engine.model.fused_norm import fused_rms_norm
    from engine.model.fused_qk_rope import fused_qk_rope_store
    from engine.model.kv_store import store_kv
    from engine.model.layers import RotaryEmbedding, apply_rope

    generator = torch.Generator(device=cuda).manual_seed(tokens)
    bf16 = torch.bfloat16

    def randn(*shape, scale=1.0):
        return (torch.randn(*shape, generator=generator, device=cuda) * scale).to(bf16)

    x, delta, weight = randn(tokens, 2048, scale=4), randn(tokens, 2048), randn(2048).abs() + 0.5
    total, normed = fused_add_rms_norm(x, delta, weight, 1e-6)
    assert torch.equal(total, x + delta) and torch.equal(normed, fused_rms_norm(x + delta, weight, 1e-6))
    q, k, v = randn(tokens, H, D, scale=3), randn(tokens, KVH, D, scale=3), randn(tokens, KVH, D)
    q_weight, k_weight = randn(D).abs() + 0.5, randn(D).abs() + 0.5
    slots = torch.randperm(64, device=cuda)[:tokens]
    for rotary_dim in (D, D // 2):
        cos, sin = RotaryEmbedding(rotary_dim, 1e6).to(cuda)(torch.arange(tokens, device=cuda) * 999 + 5, bf16)
        for norm in (True, False):
            caches = [torch.zeros(64, KVH, D, dtype=bf16, device=cuda) for _ in range(4)]
            out = fused_qk_rope_store(q, k, v, q_weight if norm else None, k_weight if norm else None, 1e-6, cos, sin,
                                      slots, caches[0], caches[1])
            q_ref, k_ref = (fused_rms_norm(q, q_weight, 1e-6), fused_rms_norm(k, k_weight, 1e-6)) if norm else (q, k)
            store_kv(caches[2], caches[3], slots, apply_rope(k_ref, cos, sin), v)
            assert torch.equal(out, apply_rope(q_ref, cos, sin)), (rotary_dim, norm)
            assert torch.equal(caches[0], caches[2]) and torch.equal(caches[1], caches[3]), (rotary_dim, norm)


@pytest.mark.parametrize("tokens", [1, 4])
def test_fused_router_has_the_bits_of_the_torch_ops(cuda, monkeypatch, tokens):
    """Softmax, top-k (or the given ids' weights), renormalisation and the cast in one kernel: the ids and weights
    of dispatch.route's and routed_weights' torch ops on CUDA (the warp softmax's adds reproduced)."""
    from engine.experts.routing import dispatch
    from engine.experts.routing.fused_router import fused_route

    monkeypatch.setattr(triton_support, "HAS_TRITON", False)  # fused_step() off: dispatch.route's torch ops
    generator = torch.Generator(device=cuda).manual_seed(tokens)
    for experts, top_k in ((128, 8), (60, 4)):
        logits = (torch.randn(tokens, experts, generator=generator, device=cuda) * 3).to(torch.bfloat16)
        for normalize in (True, False):
            expected_ids, expected = dispatch.route(logits, top_k, normalize, False)
            probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
            ids, weights = fused_route(logits, top_k, normalize, torch.bfloat16)
            assert torch.equal(ids.sort(1).values, expected_ids.sort(1).values), (experts, normalize)
            assert torch.equal(fused_route(logits, top_k, False, torch.float32)[1], probs.gather(1, ids))  # the softmax
            by_id = expected.gather(1, expected_ids.argsort(1)), weights.gather(1, ids.argsort(1))
            assert torch.equal(*by_id), (experts, normalize)  # each id's weight, in whichever order topk lists
            given = fused_route(logits, top_k, normalize, torch.bfloat16, expected_ids)[1]
            assert torch.equal(given, expected), (experts, normalize)
