"""fla's gated delta rule kernels as engine.model.delta_rule_fla calls them, in Triton's interpreter on the CPU,
against the torch forms: the calling convention (layout, repeated key heads, l2norm in the kernel, scale, fp32
initial and final state) and the decode kernel's batch invariance. Where fla-core (the `hybrid` extra) is installed;
skipped elsewhere. The GPU's numbers: tests/gpu/test_hybrid_fla.py."""

from __future__ import annotations

import builtins
import os

import pytest
import torch

pytest.importorskip("einops")
pytest.importorskip("fla.ops.gated_delta_rule")
pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="needs Triton's interpreter")


class LoopIndex(int):
    """A compiled Triton loop index is a tensor with .to(); the interpreter hands the kernel a Python int."""

    def to(self, dtype):
        return self


def loop_range(*args):
    return (LoopIndex(i) for i in builtins.range(*args))


@pytest.fixture
def fla(monkeypatch):
    import fla.ops.common.chunk_delta_h as state_pass
    import fla.ops.common.chunk_o as output_pass

    for module in (state_pass, output_pass):
        monkeypatch.setattr(module, "range", loop_range, raising=False)
    from engine.model import delta_rule_fla

    return delta_rule_fla


def delta_inputs(T: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.randn(*shape, generator=generator)  # noqa: E731
    q, k, v = rand(T, 2, 16), rand(T, 2, 16), rand(T, 4, 16)  # two value heads per key head
    g = -torch.nn.functional.softplus(rand(T, 4))
    beta, state = torch.sigmoid(rand(T, 4)), rand(4, 16, 16) * 0.1
    return q, k, v, g, beta, state


@pytest.mark.parametrize("T", [1, 5, 70])  # 70: across one 64-token chunk
def test_chunked_kernels_equal_the_torch_form(fla, T):
    from engine.model import gated_deltanet

    q, k, v, g, beta, state = delta_inputs(T)
    out, final = fla.chunked(q, k, v, g, beta, state)
    ref, ref_final = gated_deltanet.chunked(q, k, v, g, beta, state)
    assert out.shape == ref.shape and final.shape == ref_final.shape
    assert (out - ref).abs().max() < 1e-5 and (final - ref_final).abs().max() < 1e-5


def test_recurrent_kernel_equals_the_torch_form_and_a_row_alone_has_its_batch_bits(fla):
    from engine.model import gated_deltanet

    q, k, v, g, beta, _ = delta_inputs(3, seed=1)
    states = torch.stack([delta_inputs(1, seed=s)[-1] for s in range(3)])  # [B, H, Dk, Dv]
    out, final = fla.recurrent_step(q, k, v, g, beta, states)
    ref, ref_final = gated_deltanet.recurrent_step(q, k, v, g, beta, states)
    assert (out - ref).abs().max() < 1e-6 and (final - ref_final).abs().max() < 1e-6
    alone, alone_final = fla.recurrent_step(q[1:2], k[1:2], v[1:2], g[1:2], beta[1:2], states[1:2])
    assert torch.equal(alone, out[1:2]) and torch.equal(alone_final, final[1:2])
