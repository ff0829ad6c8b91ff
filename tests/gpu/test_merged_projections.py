"""Merged attention projections on CUDA (engine.quant.merged_projections; `pytest -m gpu
tests/gpu/test_merged_projections.py`): a merged layer's parts give the separate layers' bits through the decode
GEMVs (wide Q4_K and Q6_K, word Q8_0), quant_matmul and the dequantized GEMMs; and Wisp's engine on tiny llama.cpp
Q4_K_M files (qwen2_moe's projections have biases) generates the same tokens without and with merge_qkv, greedy,
seeded and batched, with logprobs within 1e-3 (the same bits where the first test passes)."""

import pytest
import torch

from engine.quant import quant_matmul
from engine.quant.linear import QuantLinearSpec
from engine.quant.merged_projections import merged_linear, mergeable_groups
from engine.quant.quant_modules import GEMV_ROWS, QuantLinear
from engine.quant.synthetic import random_blocks
from engine.quant.types import Q4_K, Q6_K, Q8_0
from tests.gguf.engine_runs import outputs
from tests.gguf.peaked import greedy_files  # noqa: F401 (the fixture)

pytestmark = pytest.mark.gpu
ROWS = (4096, 512, 512)  # Qwen3-30B-A3B's q, k, v at hidden 2048
MIXES = [(Q4_K, Q4_K, Q4_K), (Q4_K, Q4_K, Q6_K), (Q8_0, Q8_0, Q8_0)]


@pytest.fixture(scope="module")
def cuda():
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    return torch.device("cuda")


def projections(types, cuda, bias: bool) -> list[tuple[str, QuantLinear]]:
    generator = torch.Generator(device=cuda).manual_seed(0)
    layers = []
    for name, qtype, rows in zip(("q_proj", "k_proj", "v_proj"), types, ROWS):
        spec = QuantLinearSpec(qtype, rows, 2048)
        layer = QuantLinear(random_blocks(spec, 1, generator, cuda).reshape(-1), spec, bias=bias)
        if bias:
            layer.bias = torch.nn.Parameter(torch.randn(rows, generator=generator, device=cuda).bfloat16() * 0.1,
                                            requires_grad=False)
        layers.append((name, layer))
    return layers


@pytest.mark.parametrize("types", MIXES, ids=lambda types: "-".join(t.name for t in types))
@pytest.mark.parametrize("bias", [False, True])
def test_a_merged_layer_gives_the_separate_layers_bits_on_cuda(cuda, types, bias, monkeypatch):
    layers = projections(types, cuda, bias)
    by_name = dict(layers)
    groups = mergeable_groups(layers)
    merged = {group: merged_linear([by_name[name] for name in group]) for group in groups if len(group) > 1}
    for rows, gemm in ((1, "auto"), (3, "auto"), (GEMV_ROWS, "auto"), (64, "1"), (300, "0")):
        # 1: quant_matmul, 0: dequantize then multiply
        monkeypatch.setattr(quant_matmul, "AUTO_MAX_ROWS", {"auto": 1024, "1": 1 << 30, "0": 0}[gemm])
        x = torch.randn(rows, 2048, generator=torch.Generator(device=cuda).manual_seed(rows), device=cuda).bfloat16()
        with torch.inference_mode():
            separate = [by_name[name](x) for name in ("q_proj", "k_proj", "v_proj")]
            together = [out for group in groups for out in (
                merged[group](x, split=True) if group in merged else [by_name[group[0]](x)])]
        for name, got, expected in zip(("q", "k", "v"), together, separate):
            assert torch.equal(got, expected), (name, rows, gemm)


@pytest.mark.parametrize("model_type", ["qwen3_moe", "qwen2_moe"])
def test_the_engine_generates_the_same_tokens_merged_and_not(cuda, model_type, greedy_files):
    path = greedy_files.quantized(model_type, "Q4_K_M")
    runs = {}
    for switch in ("0", "1"):
        runs[switch] = outputs(path, max_tokens=12, device="cuda", experts="resident", merge_qkv=switch == "1")
    for (ids_off, logprobs_off), (ids_on, logprobs_on) in zip(runs["0"], runs["1"]):
        assert ids_on == ids_off
        assert max(abs(a - b) for a, b in zip(logprobs_on, logprobs_off)) <= 1e-3
    print("bitwise:", runs["1"] == runs["0"])
