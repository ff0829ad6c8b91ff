"""engine.experts.formats.kernel's large-step path: the token rows gathered once, grouped by expert, each expert
computing in place in its span (no per-expert gather or scatter), summed as the scatter-then-combine path summed them, bit
for bit."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from engine.quant.dense_layout import DenseLayout
from engine.experts.routing.dispatch import combine, is_small_step
from engine.runtime.determinism import use_deterministic_kernels


def expert_mlp(x, gate_up, down) -> torch.Tensor:
    """SwiGLU expert, as the engine computed it before session 10. x [n, D], gate_up [2I, D], down [D, I]."""
    gate, up = F.linear(x, gate_up).chunk(2, dim=-1)
    return F.linear(F.silu(gate) * up, down)


def scatter_reference(x, ids, weights, blocks, layout) -> torch.Tensor:
    """The path before session 9: each expert scatters its rows into [T, K, D], then combine()."""
    out = torch.empty(*ids.shape, x.shape[1], dtype=x.dtype)
    for expert in torch.unique(ids).tolist():
        tokens, kpos = torch.nonzero(ids == expert, as_tuple=True)
        block = blocks[expert]
        y = expert_mlp(x[tokens], layout.gate_up(block), layout.down(block)) * weights[tokens, kpos, None]
        out[tokens, kpos] = y.to(out.dtype)
    return combine(out, ids)


def test_grouped_large_step_equals_the_scatter_path_bit_for_bit():
    torch.manual_seed(0)
    tokens, top_k, experts, hidden, intermediate = 300, 4, 16, 32, 24
    layout = DenseLayout(hidden, intermediate, torch.bfloat16)
    blocks = torch.randn(experts, layout.numel, dtype=torch.bfloat16) / 8
    x = torch.randn(tokens, hidden, dtype=torch.bfloat16)
    others = torch.tensor([e for e in range(experts) if e not in (3, 5)])  # 3: every token's; 5: no token's
    ids = torch.stack([torch.cat([torch.tensor([3]), others[torch.randperm(len(others))[: top_k - 1]]])
                       [torch.randperm(top_k)] for _ in range(tokens)])
    assert not is_small_step(tokens, top_k, layout.numel * 2)  # the per-expert (prefill) path
    for weights in (torch.rand(tokens, top_k, dtype=torch.bfloat16), torch.rand(tokens, top_k)):  # Mixtral: fp32
        got = layout.run_blocks(x, ids, weights, blocks)
        assert got.shape == (tokens, hidden) and got.dtype == x.dtype
        assert torch.equal(got, scatter_reference(x, ids, weights, blocks, layout))
    assert not np.isin(5, ids.numpy())


def test_the_prefill_step_probe_times_the_grouped_path(capsys):
    spec = importlib.util.spec_from_file_location("prefill_step_probe", "bench/prefill_step_probe.py")
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    previous = torch.are_deterministic_algorithms_enabled()
    try:  # the probe turns deterministic kernels on for the process, as the engine does
        assert probe.main(["--tokens", "64", "--experts", "8", "--top-k", "2", "--hidden", "16",
                           "--intermediate", "8", "--repeats", "1"]) == 0
    finally:
        use_deterministic_kernels(previous)
    row = json.loads(capsys.readouterr().out)
    assert row["grouped_ms"] > 0 and "same_bits" not in row
    with pytest.raises(SystemExit):
        probe.main(["--top-k", "9", "--experts", "8"])
    assert "--top-k must not exceed --experts" in capsys.readouterr().err
