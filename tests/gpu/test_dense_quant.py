"""Quantized dense layers on CUDA, run on the H200: `pytest -m gpu tests/gpu/test_dense_quant.py`. Fails (not skips)
without a GPU. QuantLinear's GEMV (decode rows) and tiled dequantize-then-matmul (prompt rows) against the CPU's
fp64 product at Qwen3-30B-A3B's attention and lm_head widths, a decode row's bits independent of the rows beside it
and of a CUDA graph, QuantEmbedding's rows those of the dequantized table, and a synthetic Q4_K_M model whose dense
weights are quantized giving the same tokens resident and paged."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine.quant.linear import dequantize
from engine.quant.quant_modules import GEMV_ROWS, QuantEmbedding, QuantLinear
from engine.quant.types import Q4_K, Q5_K, Q6_K, Q8_0
from tests.gpu.test_quant_matmul import matrix

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cuda():
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    return torch.device("cuda")


def layer(qtype, out_features, in_features, cuda, seed=0):
    blocks, spec = matrix(qtype, out_features, in_features, cuda, seed)
    return QuantLinear(blocks, spec), dequantize(blocks.cpu(), spec, torch.float32).double()


@pytest.mark.parametrize("qtype,out_features,in_features", [(Q4_K, 4096, 2048), (Q4_K, 2048, 4096),
                                                             (Q6_K, 512, 2048), (Q8_0, 1024, 2048),
                                                             (Q5_K, 768, 2048), (Q4_K, 512, 768)])
@pytest.mark.parametrize("rows", [1, 4, GEMV_ROWS, GEMV_ROWS + 1, 300])
def test_quant_linear_on_cuda_is_the_product_within_bf16_rounding(cuda, qtype, out_features, in_features, rows):
    module, weight = layer(qtype, out_features, in_features, cuda)
    x = torch.randn(rows, in_features, generator=torch.Generator(device=cuda).manual_seed(rows), device=cuda)
    x = x.bfloat16()
    with torch.inference_mode():
        got = module(x)
    assert got.dtype == torch.bfloat16 and got.shape == (rows, out_features)
    expected = F.linear(x.cpu().double(), weight)
    scale = expected.abs().max().item()
    torch.testing.assert_close(got.cpu().double(), expected, rtol=2**-6, atol=2**-6 * scale)


def test_decode_rows_are_batch_invariant_and_graph_invariant(cuda):
    module, _ = layer(Q4_K, 4096, 2048, cuda, seed=1)
    x = torch.randn(GEMV_ROWS, 2048, device=cuda).bfloat16()
    with torch.inference_mode():
        together = module(x)
        for i in range(GEMV_ROWS):
            assert torch.equal(module(x[i : i + 1])[0], together[i])
        static_x = x.clone()
        module(static_x)  # compile outside the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = module(static_x)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(static_out, together)


def test_quant_embedding_rows_are_the_dequantized_table_rows(cuda):
    blocks, spec = matrix(Q4_K, 4096, 2048, cuda, seed=2)
    embedding = QuantEmbedding(blocks, spec, torch.bfloat16)
    ids = torch.tensor([7, 4095, 7, 0, 1234], device=cuda)
    table = dequantize(blocks.cpu(), spec, torch.bfloat16)
    with torch.inference_mode():
        assert torch.equal(embedding(ids).cpu(), table[ids.cpu()])


def test_a_model_with_quantized_dense_weights_gives_the_same_tokens_resident_and_paged(cuda):
    from engine.bench.suite import decode_once, plan_for, resident_weights
    from engine.bench.synthetic import IdOnlyTokenizer, synthetic_weights
    from engine.config import EngineOptions
    from engine.model.shapes import shape
    from engine.quant.merged_projections import projection_specs
    from engine.runtime.builder import assemble_engine

    weights = synthetic_weights(shape("qwen3-30b-a3b", num_layers=2), cuda, experts_on_host=True, quant="Q4_K_M")
    model = weights.model
    assert isinstance(model.embed_tokens, QuantEmbedding) and isinstance(model.lm_head, QuantLinear)
    assert model.lm_head.spec.qtype is Q6_K and projection_specs(model.layers[1].self_attn)["v_proj"].qtype is Q6_K
    assert projection_specs(model.layers[0].self_attn)["q_proj"].qtype is Q4_K
    bf16 = synthetic_weights(shape("qwen3-30b-a3b", num_layers=2), cuda, experts_on_host=True, quant="Q4_K_M",
                             dense_weights="dtype")
    resident = resident_weights(weights, cuda)
    assert weights.dense_bytes < 0.45 * plan_for(bf16, "resident", None, None, 1, 1024).dense_bytes
    runs = {}
    for name, host, mode, slots in (("resident", resident, "resident", None), ("paged", weights, "paged", 16)):
        plan = plan_for(host, mode, None, slots, batch=1, max_len=1024)
        assert plan.dense_bytes == weights.dense_bytes
        engine = assemble_engine(host, IdOnlyTokenizer(), EngineOptions(device="cuda", experts=mode, max_num_seqs=1),
                                 plan, cuda, 1024)
        runs[name] = decode_once(engine, prompt=64, tokens=16, batch=1, seed=0)[0]
        engine.close()
    assert runs["paged"].token_ids == runs["resident"].token_ids
    assert runs["paged"].logprobs == runs["resident"].logprobs
