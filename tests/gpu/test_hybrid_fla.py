"""The gated delta rule on fla's Triton kernels (the engine's choice where fla imports) on CUDA:
`pytest -m gpu tests/gpu/test_hybrid_fla.py`. Fails (not skips) without a GPU or without fla-core (the `hybrid` extra).
The kernels against the torch forms within rounding, their bits repeatable, in a batch equal to alone and inside a
CUDA graph equal to eager. The engine runs fla by default where it imports, so tests/gpu/test_hybrid.py checks the tiny
hybrid models with it (token-exact against transformers, which runs fla too when it is installed; bitwise across
expert modes, batch compositions and decode paths)."""

from __future__ import annotations

import pytest
import torch

from engine.model import delta_rule_kernels, gated_deltanet

pytestmark = pytest.mark.gpu
# (key heads, value heads, key dim, value dim): the tiny models' and qwen3.5-35b-a3b's (16 x 128 keys, 32 values)
HEADS = [(2, 4, 16, 16), (16, 32, 128, 128)]
# each configuration compiles its own kernels: the tiny models' heads as the engine tests run them, the 35B's in bf16
CASES = [(HEADS[0], torch.float32), (HEADS[0], torch.bfloat16), (HEADS[1], torch.bfloat16)]
CASE_IDS = ["tiny-fp32", "tiny-bf16", "35b-bf16"]
# max |fla - torch| / max |torch|: fla rounds q, k to the input dtype after its l2norm and multiplies fp32 in TF32
TOLERANCE = {torch.float32: 1e-2, torch.bfloat16: 3e-2}


@pytest.fixture
def fla():
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    kernels = delta_rule_kernels.kernels_for("cuda")
    assert kernels.name == "fla", "fla does not import: pip install 'wisp[hybrid]' (bench/hybrid_fla_h200.sh does)"
    return kernels


def delta_inputs(T: int, heads: tuple, dtype, seed: int = 0):
    """T tokens (or, for a decode step, one token of T sequences) and a state [H, Dk, Dv]."""
    key_heads, value_heads, key_dim, value_dim = heads
    generator = torch.Generator(device="cuda").manual_seed(seed)
    rand = lambda *shape: torch.randn(*shape, generator=generator, device="cuda")  # noqa: E731
    q, k, v = rand(T, key_heads, key_dim), rand(T, key_heads, key_dim), rand(T, value_heads, value_dim)
    g = -torch.nn.functional.softplus(rand(T, value_heads))  # fp32, as GatedDeltaNet.inputs makes it
    beta = torch.sigmoid(rand(T, value_heads)).to(dtype)
    state = rand(value_heads, key_dim, value_dim) * 0.1
    return q.to(dtype), k.to(dtype), v.to(dtype), g, beta, state


def states(batch: int, heads: tuple) -> torch.Tensor:
    return torch.stack([delta_inputs(1, heads, torch.float32, seed=s)[-1] for s in range(batch)])  # [B, H, Dk, Dv]


def relative_error(ours: torch.Tensor, reference: torch.Tensor) -> float:
    return ((ours.float() - reference.float()).abs().max() / reference.float().abs().max()).item()


@pytest.mark.parametrize("heads, dtype", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("T", [1, 5, 64, 65, 300, 2048])
def test_chunked_form_matches_torch_and_repeats_its_bits(fla, T, heads, dtype):
    q, k, v, g, beta, state = delta_inputs(T, heads, dtype)
    out, final = fla.chunked(q, k, v, g, beta, state)
    ref, ref_final = gated_deltanet.chunked(q, k, v, g, beta, state)
    assert out.dtype == ref.dtype and out.shape == ref.shape and final.shape == ref_final.shape
    errors = relative_error(out, ref), relative_error(final, ref_final)
    print(f"chunked T={T} {heads} {dtype}: out {errors[0]:.2e}, state {errors[1]:.2e}")
    assert max(errors) < TOLERANCE[dtype], errors
    again, again_final = fla.chunked(q, k, v, g, beta, state)
    assert torch.equal(again, out) and torch.equal(again_final, final)


def decode_inputs(batch: int, heads: tuple, dtype, step: int):
    return delta_inputs(batch, heads, dtype, seed=100 + step)[:-1]


@pytest.mark.parametrize("heads, dtype", CASES, ids=CASE_IDS)
def test_recurrent_steps_match_torch_and_each_row_equals_its_solo_row(fla, heads, dtype):
    batch = 8
    ours = reference = states(batch, heads)
    for step in range(16):
        q, k, v, g, beta = decode_inputs(batch, heads, dtype, step)
        solo = [fla.recurrent_step(q[i : i + 1], k[i : i + 1], v[i : i + 1], g[i : i + 1], beta[i : i + 1],
                                   ours[i : i + 1]) for i in range(batch)]
        out, ours = fla.recurrent_step(q, k, v, g, beta, ours)
        assert torch.equal(out, torch.cat([o for o, _ in solo])) and torch.equal(ours, torch.cat([s for _, s in solo]))
        ref, reference = gated_deltanet.recurrent_step(q, k, v, g, beta, reference)
        errors = relative_error(out, ref), relative_error(ours, reference)
        assert max(errors) < TOLERANCE[dtype], (step, errors)
    print(f"recurrent {heads} {dtype} after 16 steps: out {errors[0]:.2e}, state {errors[1]:.2e}")


@pytest.mark.parametrize("heads", HEADS, ids=["tiny", "35b"])
def test_prefill_then_decode_continues_the_chunked_form(fla, heads):
    """A prompt's state carried into decode steps gives what one chunked pass over all the tokens gives."""
    q, k, v, g, beta, state = delta_inputs(100, heads, torch.bfloat16, seed=3)
    whole, whole_state = fla.chunked(q, k, v, g, beta, state)
    out, carried = fla.chunked(q[:96], k[:96], v[:96], g[:96], beta[:96], state)
    steps, carried = [out], carried[None]
    for t in range(96, 100):
        step, carried = fla.recurrent_step(q[t : t + 1], k[t : t + 1], v[t : t + 1], g[t : t + 1], beta[t : t + 1],
                                           carried)
        steps.append(step)
    assert relative_error(torch.cat(steps), whole) < TOLERANCE[torch.bfloat16]
    assert relative_error(carried[0], whole_state) < TOLERANCE[torch.bfloat16]


def test_recurrent_step_in_a_cuda_graph_gives_the_eager_bits(fla):
    heads, batch = HEADS[1], 4
    q, k, v, g, beta = decode_inputs(batch, heads, torch.bfloat16, step=0)
    state = states(batch, heads)
    eager_out, eager_state = fla.recurrent_step(q, k, v, g, beta, state)  # also compiles the kernel before capture
    captured = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # a warm-up on a side stream, as torch's graph capture recipe does
        fla.recurrent_step(q, k, v, g, beta, state)
    torch.cuda.current_stream().wait_stream(stream)
    with torch.cuda.graph(captured):
        graph_out, graph_state = fla.recurrent_step(q, k, v, g, beta, state)
    captured.replay()
    torch.cuda.synchronize()
    assert torch.equal(graph_out, eager_out) and torch.equal(graph_state, eager_state)
