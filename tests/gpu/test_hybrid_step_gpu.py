"""The hybrids' norm, q/k, gate and MoE-tail kernels (engine.model.centred_norm_kernels, fused_qk_rope's centred
mode, engine.model.gate_kernels, engine.model.moe_tail_kernels) on CUDA:
`pytest -m gpu tests/gpu/test_hybrid_step_gpu.py`. Fails (not skips) without a GPU: against the torch ops they
replace in bf16 at the tiny model's and qwen3.5-35b-a3b's widths, a row's bits alone equal to its bits in a batch,
a CUDA graph's replay equal to eager, and the engine's greedy tokens on a tiny fp32 qwen3_5_moe equal to the torch
path's, graphed and dynamic. tests/gpu/test_hybrid.py checks the engine's bits in every expert mode (graphed too)."""

from __future__ import annotations

import sys

import pytest
import torch

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.model import centred_norm_kernels, gate_kernels, moe_tail_kernels
from engine.model.attention import KVCache
from engine.model.layers import RotaryEmbedding
from tests.model.test_hybrid import LONG_PROMPT
from tests.model.test_hybrid_step_kernels import BUILT, KERNEL_MODULES, TOLERANCE, centred_norm, gated_attention
from tests.tiny_models import write_tiny_model

pytestmark = pytest.mark.gpu
PROMPTS = [LONG_PROMPT[: 7 + 23 * i] for i in range(6)]


@pytest.fixture
def compiled(monkeypatch):
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    for module in KERNEL_MODULES:
        monkeypatch.delitem(sys.modules, module, raising=False)
    for built in BUILT:
        built.clear()
    yield
    for built in BUILT:
        built.clear()


def on(monkeypatch, is_on: bool):
    monkeypatch.setattr(centred_norm_kernels, "applies", lambda x: is_on and x.is_cuda)
    monkeypatch.setattr(moe_tail_kernels, "applies", lambda x: is_on and x.is_cuda)
    monkeypatch.setattr(gate_kernels, "applies", lambda x: is_on and x.is_cuda)


def test_the_gate_kernels_give_the_torch_ops_bits(compiled):
    """silu(gate) * up at qwen3.5-35b-a3b's shared expert width, out * sigmoid(gate) at its attention heads (the gate
    strided beside q) in bf16: torch's roundings, expf and divisions."""
    generator = torch.Generator(device="cuda").manual_seed(1)
    gate, up = ((torch.randn(8, 512, generator=generator, device="cuda") * 3).bfloat16() for _ in range(2))
    assert torch.equal(gate_kernels.silu_mul(gate, up), torch.nn.functional.silu(gate) * up)
    out = torch.randn(8, 16, 256, generator=generator, device="cuda").bfloat16()
    q_and_gate = (torch.randn(8, 16, 512, generator=generator, device="cuda") * 3).bfloat16()
    attention_gate = q_and_gate[..., 256:]
    expected = (out.reshape(8, -1) * torch.sigmoid(attention_gate.reshape(8, -1))).view(8, 16, 256)
    assert torch.equal(gate_kernels.sigmoid_gate(out, attention_gate), expected)


def test_the_moe_tail_kernel_gives_the_torch_ops_bits(compiled):
    """x + (routed + sigmoid(gate) * shared) in bf16 at qwen3.5-35b-a3b's width: torch's roundings, its sigmoid's
    expf and division; a row alone as in the batch; a graph's replay as eager."""
    generator = torch.Generator(device="cuda").manual_seed(0)
    x, routed, shared, gate = ((torch.randn(*shape, generator=generator, device="cuda") * scale).bfloat16()
                               for shape, scale in (((8, 2048), 4), ((8, 2048), 1), ((8, 2048), 1), ((8, 1), 3)))
    parts = moe_tail_kernels.GatedShared(gate, shared)
    got = moe_tail_kernels.gated_residual_sum(x, routed, parts)
    assert torch.equal(got, x + (routed + torch.sigmoid(gate) * shared))
    alone = moe_tail_kernels.gated_residual_sum(x[3:4], routed[3:4], moe_tail_kernels.GatedShared(gate[3:4],
                                                                                                shared[3:4]))
    out = torch.empty_like(x)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        moe_tail_kernels.gated_residual_sum(x, routed, parts, out=out)
    graph.replay()
    assert torch.equal(alone, got[3:4]) and torch.equal(out, got)


@pytest.mark.parametrize("width", [64, 256, 2048])  # the tiny hidden size, qwen3.5-35b-a3b's head and hidden sizes
@pytest.mark.parametrize("one_added", [False, True], ids=["centred", "one-added"])
def test_the_norm_kernels_as_the_torch_ops_by_row_and_in_a_graph(compiled, monkeypatch, width, one_added):
    norm = centred_norm(torch.bfloat16, one_added, width).cuda()
    generator = torch.Generator(device="cuda").manual_seed(width)
    x = (torch.randn(8, width, generator=generator, device="cuda") * 3).bfloat16()
    delta = torch.randn(8, width, generator=generator, device="cuda").bfloat16()
    with torch.no_grad():
        on(monkeypatch, False)
        expected = norm(x + delta)
        on(monkeypatch, True)
        total, normed = norm.add_forward(x, delta)
        alone = norm.add_forward(x[5:6], delta[5:6])
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            graphed = norm.add_forward(x, delta)
        graph.replay()
    assert torch.equal(total, x + delta)
    torch.testing.assert_close(normed, expected, **TOLERANCE[torch.bfloat16])
    assert torch.equal(alone[1], normed[5:6]) and torch.equal(graphed[1], normed)
    assert torch.equal(norm(total), normed)  # the norm alone: the same bits as after the add


@pytest.mark.parametrize("one_added", [False, True], ids=["centred", "one-added"])
def test_gated_attentions_turn_and_store_as_the_torch_ops_on_cuda(compiled, monkeypatch, tmp_path, one_added):
    args, layer = gated_attention(write_tiny_model(tmp_path, "qwen3_5_moe"), torch.bfloat16, one_added)
    layer = layer.cuda()
    x = torch.randn(4, args.hidden_size, device="cuda").bfloat16()
    rope = RotaryEmbedding(args.rotary_dim, args.rope_theta).cuda()(torch.tensor([0, 7, 400, 9], device="cuda"),
                                                                   torch.bfloat16)
    slots, results = torch.tensor([5, 0, 9, 2], device="cuda"), []
    for is_on in (False, True):
        on(monkeypatch, is_on)
        cache = KVCache(1, 12, layer.num_kv_heads, layer.head_dim, torch.bfloat16, "cuda")
        with torch.no_grad():
            q, gate = layer.gated_turn_and_store(x, rope, slots, cache)
        results.append((q, cache.k[0][slots], cache.v[0][slots]))
    (q, k, v), (q_fused, k_fused, v_fused) = results
    assert torch.equal(v_fused, v)
    torch.testing.assert_close(q_fused, q, **TOLERANCE[torch.bfloat16])
    torch.testing.assert_close(k_fused, k, **TOLERANCE[torch.bfloat16])


@pytest.mark.parametrize("decode", ["graphs", "dynamic"])
def test_the_engines_greedy_tokens_are_the_torch_paths_on_cuda(compiled, monkeypatch, tmp_path, decode):
    """fp32: the tiny models' top logprobs sit close, so bf16 tokens may part at one rounding of a norm's sum."""
    folder = write_tiny_model(tmp_path, "qwen3_5_moe", dtype=torch.float32)
    tokens = []
    for is_on in (False, True):
        on(monkeypatch, is_on)
        with Engine(EngineOptions(model=str(folder), device="cuda", dtype="float32", decode=decode)) as engine:
            sampling = SamplingParams(max_tokens=16, ignore_eos=True)
            alone = engine.generate(GenerateRequest(prompt=PROMPTS[2], sampling=sampling)).token_ids
            batched = [h.result().token_ids for h in engine.submit_batch(
                [GenerateRequest(prompt=p, sampling=sampling) for p in PROMPTS])]
        assert batched[2] == alone
        tokens.append(batched)
    assert tokens[1] == tokens[0]
