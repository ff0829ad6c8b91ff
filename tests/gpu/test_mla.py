"""Multi-head latent attention on CUDA, run on the H200: `pytest -m gpu tests/gpu/test_mla.py`. Fails (not skips)
without a GPU. The MLA decode kernel at the published models' shapes (DeepSeek-V2-Lite / Moonlight: 16 heads,
DeepSeek-V3: 128; kv_lora_rank 512, qk_rope_head_dim 64), and the tiny deepseek models through the engine with
CUDA graphs and the Triton decode: the compressed KV pool, and bitwise equal outputs across expert modes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from engine.api import Engine, EngineOptions, GenerateRequest
from engine.model.latent_cache import LatentKVCache
from engine.model.loader import read_args
from engine.model.mla_decode import absorb_output, absorb_query, latent_decode
from tests.experts.test_expert_modes import GREEDY, PROMPTS, SEEDED
from tests.tiny_models import write_tiny_model

pytestmark = pytest.mark.gpu
R, P, N, V = 512, 64, 128, 128


@pytest.fixture(scope="module")
def cuda():
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    return torch.device("cuda")


def lengths_index(lengths: list[int], slots: int, width: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    index = torch.zeros(len(lengths), width, dtype=torch.long)
    for b, length in enumerate(lengths):
        index[b, :length] = torch.randperm(slots)[:length]
    return index.to(device), torch.tensor(lengths, dtype=torch.int32, device=device)


@pytest.mark.parametrize("heads", [16, 128])
def test_kernel_at_published_shapes_is_attention_and_batch_invariant(cuda, heads):
    torch.manual_seed(0)
    slots = 8192
    pool = torch.randn(slots, 1, R + P, device=cuda, dtype=torch.bfloat16)
    q_rows = torch.randn(4, heads, R + P, device=cuda, dtype=torch.bfloat16) * 0.05
    index, lengths = lengths_index([1, 700, 4000, 33], slots, 4096, cuda)
    out = latent_decode(q_rows, pool, index, lengths, R, 0.1)  # [4, H, R]
    for b in range(4):
        rows = pool[index[b, : lengths[b]], 0].double()
        weights = torch.softmax(q_rows[b].double() @ rows.T * 0.1, dim=-1)
        torch.testing.assert_close(out[b].double(), weights @ rows[:, :R], rtol=2e-2, atol=2e-2)
        alone = latent_decode(q_rows[b : b + 1], pool, index[b : b + 1, :4096], lengths[b : b + 1], R, 0.1)
        assert torch.equal(alone[0], out[b])
    wider = torch.zeros(4, 8192, dtype=torch.long, device=cuda)
    wider[:, :4096] = index
    assert torch.equal(latent_decode(q_rows, pool, wider, lengths, R, 0.1), out)  # padding changes no bit


def test_absorbed_decode_matches_expanded_attention_at_v2_lite_shapes(cuda):
    torch.manual_seed(1)
    H, L = 16, 1500
    kv_b = torch.randn(H * (N + V), R, device=cuda, dtype=torch.bfloat16) * 0.05
    rows = torch.randn(L, R + P, device=cuda, dtype=torch.bfloat16)
    q = torch.randn(1, H, N + P, device=cuda, dtype=torch.bfloat16)
    kv = F.linear(rows[:, :R], kv_b).view(L, H, N + V)
    keys = torch.cat((kv[..., :N], rows[:, None, R:].expand(L, H, P)), -1)
    expanded = F.scaled_dot_product_attention(q.transpose(0, 1), keys.transpose(0, 1), kv[..., N:].transpose(0, 1),
                                              scale=(N + P) ** -0.5)[:, 0]  # [H, V]
    latent = latent_decode(absorb_query(q, kv_b, N), rows[:, None], torch.arange(L, device=cuda)[None],
                           torch.tensor([L], dtype=torch.int32, device=cuda), R, (N + P) ** -0.5)
    torch.testing.assert_close(absorb_output(latent, kv_b, N)[0].float(), expanded.float(), rtol=5e-2, atol=5e-2)


def engine_outputs(folder, **options):
    with Engine(EngineOptions(model=str(folder), device="cuda", **options)) as engine:
        core = engine._core
        assert isinstance(core.runner.cache, LatentKVCache)
        pool_bytes = sum(t.numel() * t.element_size() for pool in core.runner.cache.pools() for t in pool)
        assert pool_bytes == core.plan.kv_bytes
        results = [engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=s)) for s in (GREEDY, SEEDED)]
        results += [h.result() for h in engine.submit_batch(
            [GenerateRequest(prompt=p, sampling=(GREEDY, SEEDED)[i % 2]) for i, p in enumerate(PROMPTS)])]
    assert all(r.reason == "length" for r in results), [r.error for r in results]
    return [(r.token_ids, r.logprobs) for r in results]


@pytest.mark.parametrize("model_type", ["deepseek_v2", "deepseek_v3"])
def test_tiny_deepseek_is_bitwise_equal_across_expert_modes_on_cuda(cuda, tmp_path, model_type):
    folder = write_tiny_model(tmp_path, model_type, dtype=torch.bfloat16)
    num_experts = read_args(folder).num_experts
    reference = engine_outputs(folder)  # CUDA graphs, Triton MLA decode, resident experts
    for options in (dict(experts="static"), dict(experts="paged", expert_slots=2),
                    dict(experts="paged", expert_slots=num_experts)):
        assert engine_outputs(folder, **options) == reference, options
