"""The fused Gated DeltaNet decode step (engine.model.deltanet_step_kernels) on CUDA: `pytest -m gpu
tests/gpu/test_deltanet_step_gpu.py`. Fails (not skips) without a GPU:
a layer's fused step against the unfused one (fla's recurrent kernel) at the tiny models' and qwen3.5-35b-a3b's heads
in bf16, a row's bits alone equal to its bits in a batch, a verify step's chained rows equal to one-row steps, a CUDA
graph's replay equal to eager, and the engine's greedy tokens on a tiny qwen3_5_moe in bf16 equal to the unfused
path's, batched and alone, in graphed and dynamic decode steps. The measurement to take with it:
bench/results/2026-12-07-qwen35-h2h/PROFILE.md."""

from __future__ import annotations

import sys

import pytest
import torch

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.model import deltanet_step_kernels
from tests.model.test_deltanet_step_kernels import (assert_chain_is_one_row_steps, fused, layer_and_cache,
                                                    relative_error, twin)
from tests.model.test_hybrid import LONG_PROMPT
from tests.tiny_models import write_tiny_model

pytestmark = pytest.mark.gpu
# LinearAttentionArgs fields: the tiny checkpoint's own, and qwen3.5-35b-a3b's (16 x 128 keys, 32 x 128 values)
HEADS = {"tiny": {}, "35b": dict(num_key_heads=16, num_value_heads=32, key_head_dim=128, value_head_dim=128)}
# max |fused - unfused| / max |unfused|: fla rounds q, k to bf16 after its l2norm and multiplies in TF32
TOLERANCE = 3e-2
PROMPTS = [LONG_PROMPT[: 7 + 23 * i] for i in range(6)]


@pytest.fixture
def compiled(monkeypatch):
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.delitem(sys.modules, "engine.model.deltanet_step_triton", raising=False)
    deltanet_step_kernels._built.clear()
    yield
    deltanet_step_kernels._built.clear()


@pytest.fixture(scope="module")
def bf16_model(tmp_path_factory):
    return write_tiny_model(tmp_path_factory.mktemp("qwen3_5_moe-bf16"), "qwen3_5_moe", dtype=torch.bfloat16)


def step(monkeypatch, layer, cache, x, slots, on: bool):
    fused(monkeypatch, on)
    with torch.no_grad():
        inputs, z = layer.mix_inputs(x)
        return layer.output(layer.decode(torch.tensor(slots, device=x.device), inputs, cache), z)


@pytest.mark.parametrize("heads", HEADS, ids=list(HEADS))
@pytest.mark.parametrize("tiled", [False, True], ids=["interleaved", "tiled"])
def test_fused_steps_match_the_unfused_steps(compiled, monkeypatch, bf16_model, heads, tiled):
    layer, cache = layer_and_cache(bf16_model, torch.bfloat16, tiled, stores_decay=tiled, device="cuda",
                                   **HEADS[heads])
    reference = twin(cache)
    generator = torch.Generator(device="cuda").manual_seed(0)
    slots = [4, 0, 2]
    for _ in range(8):
        x = torch.randn(len(slots), layer.out_proj.out_features, device="cuda", generator=generator)
        x = x.to(torch.bfloat16)
        ours, ref = step(monkeypatch, layer, cache, x, slots, True), step(monkeypatch, layer, reference, x, slots,
                                                                             False)
        assert relative_error(ours, ref) < TOLERANCE
        ours_states, ref_states = cache.states[layer.state_layer], reference.states[layer.state_layer]
        assert torch.equal(ours_states[0], ref_states[0])  # the conv's stored inputs
        assert relative_error(ours_states[1], ref_states[1]) < TOLERANCE


def kernel_rows(layer, slots, inputs, z, cache) -> torch.Tensor:
    """The kernels' part of a fused step: the normed rows [B * H, Dv] that out_proj reads."""
    out = layer.decode(slots, inputs, cache)
    return deltanet_step_kernels.gated_norm(out.reshape(-1, layer.head_v_dim), z.reshape(-1, layer.head_v_dim),
                                            layer.norm.weight, layer.norm.eps)


def test_a_rows_bits_alone_equal_its_bits_in_a_batch_and_in_a_graph(compiled, monkeypatch, bf16_model):
    layer, cache = layer_and_cache(bf16_model, torch.bfloat16, device="cuda", **HEADS["35b"])
    fused(monkeypatch, True)
    x = torch.randn(5, layer.out_proj.out_features, device="cuda").to(torch.bfloat16)
    slots = torch.tensor([5, 1, 3, 0, 2], device="cuda")
    with torch.no_grad():
        inputs, z = layer.mix_inputs(x)
        alone_cache, graph_cache = twin(cache), twin(cache)
        together = kernel_rows(layer, slots, inputs, z, cache)  # also compiles the kernels before the capture
        alone = kernel_rows(layer, slots[2:3], tuple(t[2:3] for t in inputs), z[2:3], alone_cache)
        captured = torch.cuda.CUDAGraph()
        with torch.cuda.graph(captured):
            graphed = kernel_rows(layer, slots, inputs, z, graph_cache)
        captured.replay()
    torch.cuda.synchronize()
    heads = layer.num_v_heads
    assert torch.equal(alone, together[2 * heads : 3 * heads]) and torch.equal(graphed, together)
    states = zip(cache.states[layer.state_layer], alone_cache.states[layer.state_layer],
                 graph_cache.states[layer.state_layer])
    for state, alone_state, graph_state in states:
        assert torch.equal(alone_state[3], state[3]) and torch.equal(graph_state, state)


def greedy_tokens(folder, decode: str, prompts: list[str]) -> list[list[int]]:
    options = EngineOptions(model=str(folder), device="cuda", dtype="bfloat16", decode=decode)
    with Engine(options) as engine:
        handles = [engine.submit(GenerateRequest(prompt=p, sampling=SamplingParams(max_tokens=16, ignore_eos=True)))
                   for p in prompts]
        return [list(h.result().token_ids) for h in handles]


@pytest.mark.parametrize("decode", ["graphs", "dynamic"])
def test_the_engines_greedy_tokens_are_the_unfused_paths(compiled, monkeypatch, bf16_model, decode):
    """bf16: the fused step rounds differently from fla's kernel (no TF32, q and k kept fp32 after the l2norm), so a
    near tie of a random tiny model could flip a token; a failure here wants its logits read first."""
    fused(monkeypatch, False)
    unfused = greedy_tokens(bf16_model, decode, PROMPTS)
    fused(monkeypatch, True)
    batched = greedy_tokens(bf16_model, decode, PROMPTS)
    alone = [greedy_tokens(bf16_model, decode, [p])[0] for p in PROMPTS[:2]]
    assert batched == unfused
    assert alone == batched[:2]


@pytest.mark.parametrize("heads", HEADS, ids=list(HEADS))
def test_chained_rows_are_one_row_steps(compiled, monkeypatch, bf16_model, heads):
    """A static verify step's rows of one sequence (the kernels' chains) against one-row decode steps, bitwise."""
    layer, cache = layer_and_cache(bf16_model, torch.bfloat16, device="cuda", **HEADS[heads])
    assert_chain_is_one_row_steps(monkeypatch, layer, cache)
