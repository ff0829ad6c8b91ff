"""The long-step GEMM through a quantized dense matrix (engine.quant.quant_matmul) on the H200: `pytest -m gpu
tests/gpu/test_quant_matmul.py`. Fails (not skips) without a GPU. At Qwen3-30B-A3B's attention shapes and a prompt's
rows: the CPU's fp64 product within bf16 rounding, dequantize-then-matmul (AUTO_MAX_ROWS 0) within rounding,
the same bits run after run, whatever rows share the step and in a replayed CUDA graph, and QuantLinear's long
step is this GEMM."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine.quant import quant_matmul as qm
from engine.quant.linear import QuantLinearSpec, dequantize
from engine.quant.quant_modules import QuantLinear, dequantized_linear
from engine.quant.synthetic import random_blocks
from engine.quant.types import IQ4_NL, IQ4_XS, Q2_K, Q3_K, Q4_0, Q4_1, Q4_K, Q5_0, Q5_1, Q5_K, Q6_K, Q8_0

pytestmark = pytest.mark.gpu
SHAPES = [(Q4_K, 4096, 2048), (Q4_K, 2048, 4096), (Q6_K, 512, 2048), (Q4_K, 512, 2048), (Q8_0, 1024, 2048),
          (Q5_K, 768, 2048), (Q5_0, 1856, 2688), (Q5_1, 2816, 704), (Q4_0, 512, 2048), (Q4_1, 512, 2048),
          (Q3_K, 768, 2048), (Q2_K, 2048, 768), (IQ4_XS, 768, 2048), (IQ4_NL, 2816, 704)]


@pytest.fixture(scope="module")
def cuda():
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    return torch.device("cuda")


def matrix(qtype, out_features, in_features, device, seed=0):
    spec = QuantLinearSpec(qtype, out_features, in_features)
    blocks = random_blocks(spec, 1, torch.Generator(device=device).manual_seed(seed), device).reshape(-1)
    return blocks, spec


def inputs(rows, in_features, device, seed=0):
    return torch.randn(rows, in_features, generator=torch.Generator(device=device).manual_seed(seed),
                       device=device).bfloat16()


@pytest.mark.parametrize("qtype,out_features,in_features", SHAPES, ids=str)
def test_prompt_rows_are_the_product_within_bf16_rounding(cuda, qtype, out_features, in_features):
    blocks, spec = matrix(qtype, out_features, in_features, cuda)
    x = inputs(512, in_features, cuda)
    with torch.inference_mode():
        got = qm.quant_matmul(x, blocks, spec)
        before = dequantized_linear(x, blocks, spec, None)
    assert got.dtype == torch.bfloat16 and got.shape == (x.shape[0], out_features)
    weight = dequantize(blocks.cpu(), spec, torch.float32).bfloat16().double()
    expected = F.linear(x.cpu().double(), weight)
    scale = expected.abs().max().item()
    torch.testing.assert_close(got.cpu().double(), expected, rtol=2**-7, atol=2**-7 * scale)
    torch.testing.assert_close(got.double(), before.double(), rtol=2**-6, atol=2**-6 * scale)


def test_bits_do_not_depend_on_the_run_or_the_rows_beside_them(cuda):
    blocks, spec = matrix(Q4_K, 4096, 2048, cuda, seed=1)
    x = inputs(700, 2048, cuda, seed=1)
    with torch.inference_mode():
        whole = qm.quant_matmul(x, blocks, spec)
        assert torch.equal(qm.quant_matmul(x, blocks, spec), whole)
        assert torch.equal(qm.quant_matmul(x[100:400], blocks, spec), whole[100:400])


def test_quant_linear_long_steps_run_it_up_to_auto_max_rows(cuda, monkeypatch):
    blocks, spec = matrix(Q6_K, 512, 2048, cuda, seed=2)
    module = QuantLinear(blocks, spec, bias=True)
    module.bias = torch.nn.Parameter(torch.randn(512, device=cuda).bfloat16(), requires_grad=False)
    x = inputs(64, 2048, cuda, seed=2).view(2, 32, 2048)
    with torch.inference_mode():
        fused = module(x)  # 64 rows: within AUTO_MAX_ROWS
        assert torch.equal(fused.view(64, 512), qm.quant_matmul(x.view(64, 2048), blocks, spec) + module.bias)
        monkeypatch.setattr(qm, "AUTO_MAX_ROWS", 0)  # every long step dequantizes, then multiplies
        dequantized = module(x)
        assert torch.equal(dequantized.view(64, 512), dequantized_linear(x.view(64, 2048), blocks, spec, module.bias))
    scale = dequantized.abs().max().item()
    torch.testing.assert_close(fused.double(), dequantized.double(), rtol=2**-6, atol=2**-6 * scale)


def test_a_captured_step_replays_its_bits_after_other_step_shapes(cuda, monkeypatch):
    monkeypatch.setattr(qm, "AUTO_MAX_ROWS", 1 << 30)  # every long step runs quant_matmul
    blocks, spec = matrix(Q4_K, 512, 2048, cuda, seed=3)
    module = QuantLinear(blocks, spec)
    x = inputs(16, 2048, cuda, seed=3)
    with torch.inference_mode():
        expected = module(x).clone()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = module(x)
        module(inputs(48, 2048, cuda, seed=4))  # another step shape: the cached row tiles change
        module(x)
        graph.replay()
        torch.cuda.synchronize()
    assert torch.equal(out, expected)
