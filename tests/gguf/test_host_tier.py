"""The host tier on GGUF files: with host RAM capped below the experts' bytes, paged mode reads the rows it does
not hold from the file's mapping (padded to the store's slot size, as a held row is) and generates the same tokens
and logprobs as uncapped; page-cache reads are counted."""

from __future__ import annotations

import pytest
import torch

from engine.alloc.host_tier import plan_host_tier, staging_rows
from engine.api import Engine, EngineOptions, GenerateRequest
from engine.gguf.weights import load_gguf_weights
from engine.quant.dense import dequantize_dense
from engine.quant.gguf_store import quant_layout_of, quant_store_from_gguf
from tests.gguf.engine_runs import MAX_MODEL_LEN, PROMPTS, sampling

CASES = [("qwen3_moe", "Q4_K_M"), ("mixtral", "Q8_0")]  # Q4_K_M: layer 0's rows are padded to layer 1's Q6_K down


def experts_of(path):
    return load_gguf_weights(path, torch.float32, torch.device("cpu"), dequantize=dequantize_dense).experts


def generate(path, device="cpu", max_tokens=6, **options):
    """(outputs of a prompt alone and of a batch, greedy and seeded; the engine's stats), experts paged."""
    greedy, seeded = sampling(max_tokens)
    with Engine(EngineOptions(model=str(path), device=device, backend="wisp", max_model_len=MAX_MODEL_LEN,
                              experts="paged", **options)) as engine:
        results = [engine.generate(GenerateRequest(prompt_token_ids=PROMPTS[0], sampling=greedy))]
        handles = engine.submit_batch([GenerateRequest(prompt_token_ids=p, sampling=(greedy, seeded)[i % 2])
                                       for i, p in enumerate(PROMPTS)])
        results += [h.result() for h in handles]
        stats = engine.stats()
    assert all(r.error is None for r in results)
    return [(tuple(r.token_ids), tuple(r.logprobs)) for r in results], stats


@pytest.mark.parametrize("model_type,ftype", CASES)
def test_capped_host_ram_gives_the_same_tokens_through_the_page_cache(model_type, ftype, gguf_files):
    path = gguf_files.quantized(model_type, ftype)
    experts = experts_of(path)
    num_experts = next(iter(experts.values())).gate.shape[0]
    num_rows = len(experts) * num_experts
    row = quant_layout_of(experts).expert_bytes
    reference, _ = generate(path, expert_slots=2)
    held = 2  # layer 0's first two experts: every other row is mapped
    capped, stats = generate(path, expert_slots=2, host_budget_bytes=(staging_rows(num_experts) + held) * row)
    assert len({ids for ids, _ in reference}) > 1
    assert capped == reference
    assert stats.host_mapped_bytes == (num_rows - held) * row < num_rows * row
    assert stats.page_cache_reads > 0 and stats.page_cache_bytes > 0 and stats.page_cache_gb_per_s > 0


@pytest.mark.parametrize("model_type,ftype", CASES)
def test_mapped_rows_are_the_padded_rows_the_store_would_hold(model_type, ftype, gguf_files):
    experts = experts_of(gguf_files.quantized(model_type, ftype))
    full = quant_store_from_gguf(experts, "cpu", pin=False)
    layers, num_experts = list(full.blocks), full.num_experts
    tier = plan_host_tier(layers, num_experts, full.expert_bytes, (staging_rows(num_experts) + 1) * full.expert_bytes,
                          can_map=True)
    capped = quant_store_from_gguf(experts, "cpu", pin=False, tier=tier)
    assert torch.equal(capped.row(layers[0], 0), full.blocks[layers[0]][0])
    row = torch.full((full.layout.numel,), 0xA5, dtype=torch.uint8)  # stale bytes: padding must be rewritten
    for layer in layers:
        for expert in range(num_experts):
            if capped.row(layer, expert) is None:
                capped.mapped.read(layer, expert, row)
                assert torch.equal(row, full.blocks[layer][expert]), (layer, expert)
