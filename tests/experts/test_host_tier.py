"""The host tier on safetensors checkpoints: with host RAM capped below the experts' bytes, paged mode keeps the
rest memory-mapped and reads misses through the page cache, and every token and logprob is what it is uncapped."""

from __future__ import annotations

import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from engine.alloc.host_tier import STAGING_ROWS, staging_rows
from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.errors import HostMemoryError
from engine.model.config_file import read_args
from engine.model.families import family

PROMPTS = ["def fib(n):", "The quick brown fox", "class Stack:\n    def"]
GREEDY = SamplingParams(max_tokens=12, ignore_eos=True)
SEEDED = SamplingParams(max_tokens=12, temperature=0.9, top_p=0.9, seed=5, ignore_eos=True)


def test_the_tiny_checkpoint_stages_the_full_count(tiny_model_dir):
    assert staging_rows(read_args(tiny_model_dir("qwen3_moe")).num_experts) == STAGING_ROWS


def row_bytes(folder) -> int:
    args = read_args(folder)
    return 3 * args.hidden_size * args.moe_intermediate_size * 4  # fp32 rows on the CPU


def generate(folder, **options):
    """(outputs of a prompt alone and a batch, the engine's stats)."""
    with Engine(EngineOptions(model=str(folder), device="cpu", experts="paged", **options)) as engine:
        results = [engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=GREEDY))]
        handles = engine.submit_batch([GenerateRequest(prompt=p, sampling=(GREEDY, SEEDED)[i % 2])
                                       for i, p in enumerate(PROMPTS)])
        results += [h.result() for h in handles]
        stats = engine.stats()
    assert all(r.error is None for r in results)
    return [(r.token_ids, r.logprobs) for r in results], stats


def unfused_copy(folder, dest):
    """The checkpoint with one tensor per expert projection (the layout older transformers saved)."""
    shutil.copytree(folder, dest)
    names = family(read_args(folder).model_type).weight_names
    state, out = load_file(dest / "model.safetensors"), {}
    for name, tensor in state.items():
        if name.endswith("experts.gate_up_proj"):
            prefix, half = name[: -len("gate_up_proj")], tensor.shape[1] // 2
            for e in range(tensor.shape[0]):
                out[f"{prefix}{e}.{names.gate}.weight"] = tensor[e, :half].clone()
                out[f"{prefix}{e}.{names.up}.weight"] = tensor[e, half:].clone()
        elif name.endswith("experts.down_proj"):
            for e in range(tensor.shape[0]):
                out[f"{name[: -len('down_proj')]}{e}.{names.down}.weight"] = tensor[e].clone()
        else:
            out[name] = tensor
    save_file(out, dest / "model.safetensors", metadata={"format": "pt"})
    return dest


@pytest.fixture(params=["fused", "per-expert"])
def checkpoint(request, tiny_model_dir, tmp_path):
    folder = tiny_model_dir("qwen3_moe")
    return folder if request.param == "fused" else unfused_copy(folder, tmp_path / "unfused")


@pytest.mark.parametrize("slots", ["top_k", "all"])
def test_capped_host_ram_gives_the_same_tokens_through_the_page_cache(checkpoint, slots):
    args = read_args(checkpoint)
    options = dict(expert_slots=args.num_experts_per_tok if slots == "top_k" else args.num_experts)
    reference, full = generate(checkpoint, **options)
    held_rows = 3
    capped, stats = generate(checkpoint, host_budget_bytes=(STAGING_ROWS + held_rows) * row_bytes(checkpoint),
                             **options)
    assert len({ids for ids, _ in reference}) > 1  # the prompts differ: a real comparison
    assert capped == reference
    num_rows = sum(args.moe_layers) * args.num_experts
    assert stats.host_mapped_bytes == (num_rows - held_rows) * row_bytes(checkpoint)
    assert stats.host_pinned_bytes == (held_rows + STAGING_ROWS) * row_bytes(checkpoint)
    assert stats.page_cache_reads > 0 and stats.page_cache_bytes == stats.page_cache_reads * row_bytes(checkpoint)
    assert stats.page_cache_gb_per_s > 0
    assert (full.page_cache_reads, full.host_mapped_bytes) == (0, 0)
    assert full.host_pinned_bytes == num_rows * row_bytes(checkpoint)


def test_static_offload_past_the_host_budget_is_refused_with_the_way_out(tiny_model_dir):
    folder = tiny_model_dir("qwen3_moe")
    with pytest.raises(HostMemoryError, match="--experts paged"):
        Engine(EngineOptions(model=str(folder), device="cpu", experts="static", host_budget_bytes=row_bytes(folder)))


def test_a_host_budget_below_the_staging_rows_is_refused(tiny_model_dir):
    folder = tiny_model_dir("qwen3_moe")
    with pytest.raises(HostMemoryError, match="--host-budget"):
        Engine(EngineOptions(model=str(folder), device="cpu", experts="paged", host_budget_bytes=row_bytes(folder)))


def test_mapped_rows_are_the_bytes_the_store_would_hold(checkpoint):
    from engine.runtime.builder import load_weights
    from engine.alloc.host_tier import plan_host_tier

    cpu = torch.device("cpu")
    full = load_weights(checkpoint, cpu, "float32").store
    layers, num_experts = list(full.blocks), full.num_experts
    capped = load_weights(checkpoint, cpu, "float32", expert_device=cpu, plan_tier=lambda *a: plan_host_tier(
        layers, num_experts, full.expert_bytes, STAGING_ROWS * full.expert_bytes, can_map=True)).store
    assert capped.mapped is not None and all(len(capped.held(layer)) == 0 for layer in layers)
    row = torch.full_like(full.blocks[layers[0]][0], float("nan"))
    for layer in layers:
        for expert in range(num_experts):
            capped.mapped.read(layer, expert, row)
            assert torch.equal(row.view(torch.int32), full.blocks[layer][expert].view(torch.int32)), (layer, expert)


def test_more_mapped_misses_than_staging_rows_are_copied_in_turns(tiny_model_dir):
    """One copy call with more mapped rows than staging rows: each group is copied before its rows are reused."""
    from engine.alloc.host_tier import HostTier
    from engine.experts.pager.copy_engine import CopyEngine
    from engine.experts.counters import ExpertCounters
    from engine.experts.pager.mapped_reads import RowCopier
    from engine.runtime.builder import load_weights

    folder, cpu = tiny_model_dir("qwen3_moe"), torch.device("cpu")
    full = load_weights(folder, cpu, "float32").store
    layers, num_experts = list(full.blocks), full.num_experts
    held = {layer: (1,) if layer == layers[0] else () for layer in layers}
    capped = load_weights(folder, cpu, "float32", plan_tier=lambda *a: HostTier(
        full.expert_bytes, num_experts, held, staging_rows=2)).store
    counters = ExpertCounters()
    copier = RowCopier(capped, CopyEngine(cpu, counters), counters, cpu)
    slots = torch.full((num_experts, full.layout.numel), float("nan"))
    copier.copy([(slots[e], layers[0], e) for e in range(num_experts)])
    assert torch.equal(slots, full.blocks[layers[0]])
    assert counters.page_cache_reads == num_experts - 1 and counters.h2d_bytes == num_experts * full.expert_bytes


def write_trace(path, num_layers: int, num_experts: int, per_layer: list[list[list[int]]]):
    """A trace whose row r routes per_layer[l][r % len] at MoE layer l (one prefill step)."""
    import numpy as np

    from engine.traces.format import Trace, TraceHeader, save

    rows = 12
    ids = np.array([[per_layer[layer][r % len(per_layer[layer])] for layer in range(num_layers)]
                    for r in range(rows)])  # [N, L, K]
    header = TraceHeader("tiny", "qwen3_moe", num_layers, num_experts, ids.shape[2], "chat")
    save(Trace(header, np.array([True]), np.array([rows]), ids, np.zeros(rows, dtype=np.int32)), path)
    return path


def test_a_pin_trace_pins_its_most_used_experts_and_changes_no_token(tiny_model_dir, tmp_path):
    folder = tiny_model_dir("qwen3_moe")
    args = read_args(folder)
    layers = [i for i, is_moe in enumerate(args.moe_layers) if is_moe]
    trace = write_trace(tmp_path / "t.npz", len(layers), args.num_experts,
                        [[[6, 7], [1, 2]]] + [[[5, 3]]] * (len(layers) - 1))
    request = GenerateRequest(prompt=PROMPTS[0], sampling=GREEDY)
    options = dict(model=str(folder), device="cpu", experts="paged", expert_slots=2)
    with Engine(EngineOptions(**options)) as engine:
        reference = engine.generate(request)
    with Engine(EngineOptions(**options, host_budget_bytes=(STAGING_ROWS + 2) * row_bytes(folder),
                              pin_trace=str(trace))) as engine:
        held = engine._core.host_tier.in_memory
        capped = engine.generate(request)
    assert held == {layer: ((3, 5) if layer == layers[1] else ()) for layer in layers}
    assert (capped.token_ids, capped.logprobs) == (reference.token_ids, reference.logprobs)


def test_a_pin_trace_of_another_model_is_refused(tiny_model_dir, tmp_path):
    from engine.traces.format import TraceFormatError

    folder = tiny_model_dir("qwen3_moe")
    trace = write_trace(tmp_path / "t.npz", 5, 8, [[[1, 2]]] * 5)
    with pytest.raises(TraceFormatError, match="record one of this model"):
        Engine(EngineOptions(model=str(folder), device="cpu", experts="paged", pin_trace=str(trace)))
