"""Byte-identity: token ids and logprobs are bitwise equal whether experts are resident, statically offloaded
or paged through any number of slots, with or without prefetch, greedy or seeded, alone or batched."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.model.loader import read_args
from tests.tiny_models import MODEL_TYPES

PROMPTS = ["def fib(n):", "The quick brown fox", "class Stack:\n    def", "héllo wörld 你好"]
GREEDY = SamplingParams(max_tokens=20, ignore_eos=True)
SEEDED = SamplingParams(max_tokens=20, temperature=0.9, top_p=0.9, seed=11, ignore_eos=True)


def outputs(folder, max_tokens: int = GREEDY.max_tokens, **options) -> list[tuple]:
    """Greedy alone, seeded alone, then four prompts batched (greedy and seeded mixed), each max_tokens long."""
    greedy, seeded = (replace(s, max_tokens=max_tokens) for s in (GREEDY, SEEDED))
    with Engine(EngineOptions(model=str(folder), device="cpu", **options)) as engine:
        results = [engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=s)) for s in (greedy, seeded)]
        handles = engine.submit_batch([GenerateRequest(prompt=p, sampling=(greedy, seeded)[i % 2])
                                       for i, p in enumerate(PROMPTS)])
        results += [h.result() for h in handles]
    assert all(r.error is None for r in results), [r.error for r in results]
    return [(r.token_ids, r.logprobs) for r in results]


def mode_options(top_k: int, num_experts: int) -> dict[str, dict]:
    return {
        "static": dict(experts="static"),
        "paged-top_k": dict(experts="paged", expert_slots=top_k),
        "paged-2top_k": dict(experts="paged", expert_slots=2 * top_k),
        "paged-all": dict(experts="paged", expert_slots=num_experts),
        "paged-1-prefetch": dict(experts="paged", expert_slots=1, prefetch=True),
        "paged-top_k-prefetch": dict(experts="paged", expert_slots=top_k, prefetch=True),
    }


def expert_path(args) -> tuple:
    """What the code of a step's experts depends on besides the routed ids and weights, which the router computes
    before any expert provider runs: what an expert computes (ModelArgs.experts: activation, biases, block type,
    latent width), which shared experts run beside them, whether the weights stay fp32, and which layers are MoE
    layers of which stack (the layer kinds of a hybrid or block stack, Gemma 4's sandwich layers). Where two models
    agree, the providers and the expert layout run the same lines for both (engine/experts: only they read the
    gather limit)."""
    shared = args.shared_experts
    return (args.experts, bool(shared.shared_expert_intermediate_size), bool(shared.n_shared_experts),
            args.router.weights_fp32, all(args.moe_layers), args.is_hybrid and tuple(sorted(set(args.layer_types))),
            args.sandwich is not None)


# model_type -> the first of MODEL_TYPES with its expert_path, for the others (test_the_expert_path_twins_are_the_models
# checks it). A twin's steps run its first's code: its gathered steps run in the slow step, its per-expert ones not
# at all.
EXPERT_PATH_TWIN_OF = {"olmoe": "qwen3_moe", "minimax_m2": "qwen3_moe", "qwen3_vl_moe": "qwen3_moe",
                       "deepseek_v2": "glm4_moe", "deepseek_v3": "glm4_moe", "ernie4_5_moe": "glm4_moe",
                       "glm4_moe_lite": "glm4_moe", "qwen3_5_moe": "qwen3_next", "qwen3_5_moe_text": "qwen3_next",
                       "gemma4_text": "gemma4"}


def mode_cases() -> list:
    """(model_type, gather limit): every architecture with every step gathered (a twin's in the slow step), and the
    per-expert path (a small limit: prefill and batches take it) once per distinct expert_path."""
    cases = []
    for model_type in MODEL_TYPES:
        twin = model_type in EXPERT_PATH_TWIN_OF
        cases.append(pytest.param(model_type, "default", marks=[pytest.mark.slow] if twin else []))
        if not twin:
            cases.append(pytest.param(model_type, "per-expert-prefill"))
    return cases


def test_the_expert_path_twins_are_the_models(tiny_model_dir):
    paths = {model_type: expert_path(read_args(tiny_model_dir(model_type))) for model_type in MODEL_TYPES}
    first = {model_type: next(other for other in MODEL_TYPES if paths[other] == path)
             for model_type, path in paths.items()}
    assert {model_type: other for model_type, other in first.items() if other != model_type} == EXPERT_PATH_TWIN_OF


@pytest.mark.parametrize("model_type,gather_limit", mode_cases())
def test_every_expert_mode_is_bitwise_resident(tiny_model_dir, monkeypatch, model_type, gather_limit):
    """Every expert mode gives resident's tokens and logprobs bit for bit; the per-expert path forced by a gather
    limit of three olmoe experts (its code does not depend on the attention or the router)."""
    if gather_limit != "default":
        from engine.experts.routing import dispatch

        monkeypatch.setattr(dispatch, "GATHER_LIMIT_BYTES", 3 * read_args(tiny_model_dir("olmoe")).expert_numel * 4)
    folder = tiny_model_dir(model_type)
    args = read_args(folder)
    reference = outputs(folder, experts="resident")
    for name, options in mode_options(args.num_experts_per_tok, args.num_experts).items():
        assert outputs(folder, **options) == reference, name


def test_paged_counters_add_up_to_routed_uses(tiny_model_dir):
    folder = tiny_model_dir("qwen3_moe")
    with Engine(EngineOptions(model=str(folder), device="cpu", experts="paged", expert_slots=3)) as engine:
        routed = []
        engine._core.runner.routing_observer = lambda layer, ids: routed.append(len(set(ids.flatten().tolist())))
        engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=GREEDY))
        counters = engine.expert_counters()
    assert counters.hits + counters.misses == sum(routed)
    assert counters.misses > 0 and counters.hits > 0 and counters.evictions > 0
    assert counters.h2d_bytes == counters.misses * engine.info.plan.expert_bytes
    assert sum(counters.layer_hits.values()) == counters.hits


def test_cli_json_reports_expert_counters(tiny_model_dir, capsys):
    import json

    from engine.cli import main

    folder = tiny_model_dir("mixtral")
    capsys.readouterr()
    code = main(["run", str(folder), "--prompt", "def fib(n):", "--max-tokens", "8", "--device", "cpu",
                 "--experts", "paged", "--expert-slots", "2", "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    stats = result["stats"]
    assert 1 <= len(result["token_ids"]) == len(result["logprobs"]) <= 8
    assert stats["expert_hits"] + stats["expert_misses"] > 0 and stats["h2d_bytes"] > 0


def test_grouped_prefill_is_bitwise_across_modes(tiny_model_dir, monkeypatch):
    """Where the grouped kernels run (forced here: Triton's interpreter on the CPU), resident and static layers plan
    their large steps on the device (engine.experts.routing.dispatch.plan_on_device) and the pager on the host from
    the ids it reads back: the same tiles, so the same bits. Four tokens: the prefills and the batch's decode steps
    (four rows, past the gather limit) run grouped, and a tile's bits would show in the first token's logprobs."""
    from engine.experts.routing import dispatch
    from engine.quant import expert_format, grouped_gemm

    folder = tiny_model_dir("qwen3_moe")
    args = read_args(folder)
    monkeypatch.setattr(dispatch, "GATHER_LIMIT_BYTES", 3 * read_args(tiny_model_dir("olmoe")).expert_numel * 4)
    monkeypatch.setattr(grouped_gemm, "runs_grouped", lambda *_: True)
    monkeypatch.setattr(expert_format, "runs_grouped", lambda *_: True)
    reference = outputs(folder, max_tokens=4, experts="resident")
    modes = mode_options(args.num_experts_per_tok, args.num_experts)
    for name in ("static", "paged-top_k", "paged-all"):
        assert outputs(folder, max_tokens=4, **modes[name]) == reference, name


@pytest.mark.parametrize("rows", [2, 64])
def test_prefill_lookahead_is_bitwise_resident(tiny_model_dir, monkeypatch, rows):
    """The lookahead on the CPU with every large step staging (forced: the tiny prompts have a few tokens): paged
    layers compute the experts staged for them from the lookahead ring, at a ring smaller than a layer's misses and
    at one holding them all; the same tokens and logprobs as resident."""
    from engine.experts.pager import host_pager, lookahead
    from engine.experts.routing import dispatch

    folder = tiny_model_dir("qwen3_moe")
    args = read_args(folder)
    monkeypatch.setattr(dispatch, "GATHER_LIMIT_BYTES", 3 * read_args(tiny_model_dir("olmoe")).expert_numel * 4)
    reference = outputs(folder, experts="resident")
    monkeypatch.setattr(host_pager, "configured_rows", lambda expert_bytes, device_type: rows)
    monkeypatch.setattr(lookahead, "MIN_ENTRIES_PER_EXPERT", 1)
    monkeypatch.setattr(lookahead, "gathered_rows", lambda _: rows)
    staged = []
    stage = lookahead.Lookahead.stage
    monkeypatch.setattr(lookahead.Lookahead, "stage", lambda self, layer: staged.append(layer) or stage(self, layer))
    modes = mode_options(args.num_experts_per_tok, args.num_experts)
    for name in ("paged-top_k", "paged-2top_k"):
        staged.clear()
        assert outputs(folder, **modes[name]) == reference, name
        assert staged, name
