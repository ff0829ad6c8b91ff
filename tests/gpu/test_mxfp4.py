"""gpt-oss's MXFP4 experts on CUDA (`pytest -m gpu tests/gpu/test_mxfp4.py`): the quantized format with biases and
the clamped SwiGLU against float64 on both paths and batch invariant; every provider (the graphed pager included)
giving the same bits; an MXFP4 checkpoint and the GGUF file repacked from it (written here: no llama.cpp needed)
bitwise identical to each other and across resident, static and paged, greedy tokens starting as the CPU's."""

import gc

import numpy as np
import pytest
import torch

from engine.experts.formats.activation import ExpertBias
from engine.experts.providers.paged import PagedExperts
from engine.experts.providers.resident import ResidentExperts
from engine.experts.providers.static import StaticOffloadExperts
from engine.quant.expert_format import QuantExpertFormat
from engine.quant.gguf_store import quant_store_from_gguf
from tests.gguf.engine_runs import mode_options, outputs
from tests.gguf.gpt_oss_files import gpt_oss_greedy_files  # noqa: F401 (the fixture)
from tests.quant import test_gpt_oss_format as gpt_oss
from tests.quant import test_quant_providers as providers
from tests.quant.blocks import random_experts
from tests.quant.moe_reference import both_paths, dense_experts, routed

pytestmark = pytest.mark.gpu
FIRST_TOKENS = 4


@pytest.fixture(scope="module")
def cuda():
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    return torch.device("cuda")


def on(bias: ExpertBias, device, dtype=torch.bfloat16) -> ExpertBias:
    return ExpertBias(bias.gate_up.to(device=device, dtype=dtype), bias.down.to(device=device, dtype=dtype))


@pytest.mark.parametrize("name", list(gpt_oss.FORMATS))
def test_format_paths_match_float64(cuda, name):
    D, I, E = gpt_oss.D, gpt_oss.I, gpt_oss.E
    bias = on(gpt_oss.random_bias(E, D, I, seed=1), cuda)
    layout = QuantExpertFormat(D, I, *gpt_oss.FORMATS[name], activation=gpt_oss.ACTIVATION, bias=bias)
    table, parts = random_experts(layout, E, seed=2)
    ids, weights = routed(6, E, top_k=3, seed=3)
    x = torch.randn(6, D, generator=torch.Generator().manual_seed(4)).to(torch.bfloat16)
    w = weights.to(torch.bfloat16)
    table, x_gpu, ids_gpu, w_gpu = table.to(cuda), x.to(cuda), ids.to(cuda), w.to(cuda)
    small, large = both_paths(layout, table, x_gpu, ids_gpu, w_gpu)
    expected = gpt_oss.float64_gpt_oss(x, ids, w.double(), dense_experts(layout, parts), on(bias, "cpu"))
    for got in (small, large):
        np.testing.assert_allclose(got.double().cpu().numpy(), expected, rtol=5e-2, atol=5e-2 * np.abs(expected).max())
    for t in range(6):
        one = layout.run_rows(x_gpu[t : t + 1], table, ids_gpu[t], ids_gpu[t : t + 1], w_gpu[t : t + 1])
        assert torch.equal(one, small[t : t + 1])


def test_providers_give_the_same_bits(cuda):
    """Resident, static offload and paged (host pager and the graphed path) on MXFP4 experts with biases."""
    types = {0: ("MXFP4",) * 3, 1: ("MXFP4", "MXFP4", "Q8_0"), 3: ("MXFP4",) * 3}  # providers.outputs' layers
    biases = {layer: on(gpt_oss.random_bias(providers.E, providers.D, providers.I, seed=10 + layer), cuda)
              for layer in types}
    layers = {layer: providers.fake_layer(layer, kinds) for layer, kinds in types.items()}
    resident = ResidentExperts(quant_store_from_gguf(layers, cuda, pin=False, activation=gpt_oss.ACTIVATION,
                                                     biases=biases))
    host = quant_store_from_gguf(layers, torch.device("cpu"), pin=True, activation=gpt_oss.ACTIVATION, biases=biases)
    assert set(types) == set(providers.TYPES)
    expected = providers.outputs(resident, device=cuda)
    runs = [(StaticOffloadExperts(host, cuda, num_offloaded_layers=2), False)]
    runs += [(PagedExperts(host, cuda, {layer: slots for layer in types}), graphed)
             for slots in (2, 5) for graphed in (False, True)]
    for provider, graphed in runs:
        for got, want in zip(providers.outputs(provider, graphed, device=cuda), expected):
            assert torch.equal(got, want), (provider.name, graphed)


def test_mxfp4_checkpoint_and_its_gguf_on_cuda(cuda, gpt_oss_greedy_files):
    checkpoint, _ = gpt_oss_greedy_files.mxfp4_pair()
    path = gpt_oss_greedy_files.repacked()
    reference = outputs(checkpoint, max_tokens=12, device="cuda", experts="resident")
    assert outputs(path, max_tokens=12, device="cuda", experts="resident") == reference
    for name, options in mode_options(path, dtype_bytes=4).items():
        gc.collect()
        assert outputs(path, max_tokens=12, device="cuda", **options) == reference, name
    cpu = outputs(path, max_tokens=FIRST_TOKENS, device="cpu", experts="resident")
    assert cpu[0][0] == reference[0][0][:FIRST_TOKENS]
