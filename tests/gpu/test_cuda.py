"""CUDA checks, run on the H200: `pytest -m gpu tests/gpu`. They fail (not skip) without a GPU."""

from __future__ import annotations

import gc
import json

import pytest
import torch
import transformers

from engine.alloc.memory_plan import GiB
from engine.system import triton_support
from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.bench.graph_timing import step_gpu_ms
from engine.model.loader import read_args
from tests.experts.test_expert_modes import GREEDY, PROMPTS, SEEDED, mode_options
from tests.tiny_models import write_tiny_model

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def bf16_model_dir(tmp_path_factory):
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    cache = {}

    def get(model_type):
        if model_type not in cache:
            cache[model_type] = write_tiny_model(tmp_path_factory.mktemp(model_type), model_type, dtype=torch.bfloat16)
        return cache[model_type]

    return get


def cuda_outputs(folder, **options):
    with Engine(EngineOptions(model=str(folder), device="cuda", **options)) as engine:
        results = [engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=s)) for s in (GREEDY, SEEDED)]
        results += [h.result() for h in engine.submit_batch(
            [GenerateRequest(prompt=p, sampling=(GREEDY, SEEDED)[i % 2]) for i, p in enumerate(PROMPTS)])]
    assert all(r.reason == "length" for r in results), [r.error for r in results]
    return [(r.token_ids, r.logprobs) for r in results]


def first_difference(ours, reference) -> int:
    return next((i for i, (a, b) in enumerate(zip(ours, reference)) if a != b), len(reference))


def test_bf16_greedy_matches_transformers_on_cuda(bf16_model_dir, model_type):
    """Wisp's bf16 greedy tokens against transformers on the same bf16 weights, run in bf16 and in fp32 (the exact
    answer bf16 approximates). A tiny random model's logits are nearly flat, so rounding may flip a near-tie
    early, in either program: Wisp must follow one of the two for 16 tokens, or part from fp32 only where fp32
    rates the two choices within a bf16 rounding step of each other."""
    from tests.model.test_models import hf_reference

    folder = bf16_model_dir(model_type)
    with Engine(EngineOptions(model=str(folder), device="cuda")) as engine:
        assert engine.info.dtype == "bfloat16"
        ids = engine._core.tokenizer.encode(PROMPTS[0])
        ours = engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=SamplingParams(max_tokens=32, ignore_eos=True)))
    matching = {}
    for dtype in (torch.bfloat16, torch.float32):
        model = hf_reference(folder, dtype).cuda()
        with torch.inference_mode():
            out = model.generate(torch.tensor([ids], device="cuda"), max_new_tokens=32, min_new_tokens=32,
                                 do_sample=False, eos_token_id=None, pad_token_id=0)
            reference = out[0, len(ids):].tolist()
            matching[dtype] = first_difference(ours.token_ids, reference)
            if dtype == torch.float32 and matching[dtype] < 32:
                at = matching[dtype]
                logprobs = model(torch.tensor([ids + list(ours.token_ids[:at])], device="cuda")).logits[0, -1]
                logprobs = logprobs.float().log_softmax(-1)
                margin = (logprobs[reference[at]] - logprobs[ours.token_ids[at]]).item()
    print(f"{model_type}: Wisp bf16 on CUDA equals transformers {transformers.__version__} bf16 for "
          f"{matching[torch.bfloat16]}/32 greedy tokens, "
          f"transformers fp32 for {matching[torch.float32]}/32"
          + (f" (fp32 margin at the difference {margin:.4f} nats)" if matching[torch.float32] < 32 else ""))
    if max(matching.values()) < 16:
        assert margin < 0.05, f"token {matching[torch.float32]}: fp32 rates Wisp's choice {margin:.3f} nats below its own"


def test_expert_modes_bitwise_on_cuda(bf16_model_dir, model_type):
    folder = bf16_model_dir(model_type)
    args = read_args(folder)
    reference = cuda_outputs(folder, experts="resident")
    for name, options in mode_options(args.num_experts_per_tok, args.num_experts).items():
        assert cuda_outputs(folder, **options) == reference, name


@pytest.mark.parametrize("model_type", ["qwen3_moe", "mixtral", "glm4_moe"])  # q/k norm; none; partial RoPE
def test_fused_step_keeps_the_tokens(bf16_model_dir, monkeypatch, model_type):
    """The decode step's fused kernels (engine.system.triton_support.fused_step) give the tokens and logprobs of the
    kernels they replace, with CUDA graphs and paged experts too."""
    folder = bf16_model_dir(model_type)
    outputs = {}
    for fused in ("0", "1"):  # 0: engine.system.triton_support.fused_step() off, the kernels they replace
        monkeypatch.setattr(triton_support, "HAS_TRITON", fused == "1")
        outputs[fused] = [cuda_outputs(folder), cuda_outputs(folder, decode="graphs", experts="paged", expert_slots=3)]
    assert outputs["1"] == outputs["0"]


def test_paged_qwen3_shape_stays_within_budget():
    from engine.model.shapes import shape
    from engine.bench.suite import decode_once, plan_for
    from engine.bench.synthetic import IdOnlyTokenizer, synthetic_weights
    from engine.runtime.builder import assemble_engine

    device = torch.device("cuda")
    weights = synthetic_weights(shape("qwen3-30b-a3b", num_layers=4), device, experts_on_host=True)
    budget = 3 * GiB
    gc.collect()  # engines of earlier tests may still hold device memory until the cycle collector runs
    torch.cuda.empty_cache()
    dense = sum(t.numel() * t.element_size() for t in weights.model.state_dict().values() if t.is_cuda)
    others = torch.cuda.memory_allocated(device) - dense  # not this engine's: left by earlier tests, if any
    torch.cuda.reset_peak_memory_stats(device)
    plan = plan_for(weights, "paged", budget, None, batch=1, max_len=4096)
    engine = assemble_engine(weights, IdOnlyTokenizer(), EngineOptions(device="cuda", experts="paged", max_num_seqs=1),
                             plan, device, 4096)
    built = torch.cuda.max_memory_allocated(device) - others
    decode_once(engine, prompt=1024, tokens=1, batch=1, seed=0)
    prefill = torch.cuda.max_memory_allocated(device) - others
    decode_once(engine, prompt=1024, tokens=16, batch=1, seed=1)
    peak = torch.cuda.max_memory_allocated(device) - others
    print(f"budget {budget / 1e6:.0f} MB, plan {plan.total_bytes / 1e6:.0f} MB (dense {plan.dense_bytes / 1e6:.0f}, "
          f"experts {plan.expert_device_bytes / 1e6:.0f}, kv {plan.kv_bytes / 1e6:.0f}, workspace "
          f"{plan.workspace_bytes / 1e6:.0f}); not this engine's {others / 1e6:.0f} MB; this engine's peak after "
          f"build {built / 1e6:.0f}, prefill {prefill / 1e6:.0f}, decode {peak / 1e6:.0f} MB")
    assert 8 <= plan.min_layer_slots < 128
    assert peak <= budget


def test_cuda_graph_replays_equal_the_eager_static_path(bf16_model_dir):
    folder = bf16_model_dir("qwen3_moe")
    assert cuda_outputs(folder, decode="graphs") == cuda_outputs(folder, decode="static")
    graphs = cuda_outputs(folder, decode="graphs", experts="paged", expert_slots=3)
    assert graphs == cuda_outputs(folder, decode="graphs")


def test_device_pager_copies_from_pinned_memory_and_matches_the_host_lru():
    from engine.alloc.expert_lru import ExpertLRU
    from engine.alloc.miss_curve import step_unique
    from engine.experts.pager.device_lru import DeviceLRU
    from engine.experts.pager.uva import as_words, device_view

    device = torch.device("cuda")
    experts, top_k, capacity = 64, 8, {0: 12, 1: 20}
    base = {0: 0, 1: 12}
    host = {layer: torch.randn(experts, 3000, dtype=torch.bfloat16).pin_memory() for layer in capacity}
    pool = torch.zeros(32, 3000, dtype=torch.bfloat16, device=device)
    state = DeviceLRU(list(capacity), experts, capacity, base, device)
    lrus = {layer: ExpertLRU(cap) for layer, cap in capacity.items()}
    state.push(lrus)
    free = {layer: list(range(base[layer] + cap - 1, base[layer] - 1, -1)) for layer, cap in capacity.items()}
    generator = torch.Generator().manual_seed(0)
    misses = 0
    for _ in range(50):
        for layer in capacity:
            ids = torch.randint(0, experts // 2, (1, top_k), generator=generator)
            needed = [int(e) for e in step_unique(ids.numpy())]
            hit, miss = lrus[layer].split(needed)
            misses += len(miss)
            for expert in miss:
                lrus[layer].place(expert, set(needed), lambda: free[layer].pop() if free[layer] else None)
            lrus[layer].touch(needed)
            rows, src, dst, over, _ = state.step(layer, ids.to(device))
            assert bool((over == -1).all())  # a capacity of at least top_k: every miss finds a slot
            state.copy_misses(device_view(host[layer], device), as_words(pool), src, dst)
            assert torch.equal(pool[rows].cpu(), host[layer][ids.reshape(-1)])
    pulled = {layer: ExpertLRU(cap) for layer, cap in capacity.items()}
    state.pull(pulled)
    assert {k: list(v.slots) for k, v in pulled.items()} == {k: list(v.slots) for k, v in lrus.items()}
    assert state.take_counts()[:, 1].sum() == misses


def test_graphed_paged_decode_counts_like_the_host_pager(bf16_model_dir):
    folder = bf16_model_dir("qwen3_moe")
    top_k = read_args(folder).num_experts_per_tok
    seen = {}
    for decode in ("graphs", "static"):
        with Engine(EngineOptions(model=str(folder), device="cuda", experts="paged", expert_slots=2 * top_k,
                                  decode=decode)) as engine:
            result = engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=GREEDY))
            counters = engine.expert_counters()
            seen[decode] = (result.token_ids, result.logprobs, counters.hits, counters.misses, counters.evictions)
            if decode == "graphs":
                static = next(iter(engine._core.runner.padded_decode.by_batch.values()))
                assert static.whole is not None, "the decode step did not run as whole-step CUDA graphs"
                assert len(static.whole) == 1  # one graph per step unless WholeStepOptions.chunk_layers splits it
                gpu_ms = step_gpu_ms(engine._core, 1)  # what `wisp bench` records per row, after the timed runs
                assert gpu_ms is not None and 0 < gpu_ms < 1e3
    assert seen["graphs"] == seen["static"]
    assert seen["graphs"][3] > 0


def test_graphed_batched_decode_with_fewer_slots_than_entries(bf16_model_dir):
    """A batched decode step needing more experts than a layer has slots still runs as whole-step graphs: the
    misses past the last free slot are read straight into the step's buffer. Same bits and counts as the host
    pager. One layer per graph, so every hand-over between graphs is on the path."""
    from engine.runtime.decode_graphs import WholeStepOptions

    folder = bf16_model_dir("qwen3_moe")
    top_k = read_args(folder).num_experts_per_tok
    seen = {}
    for decode in ("graphs", "static"):
        with Engine(EngineOptions(model=str(folder), device="cuda", experts="paged", expert_slots=top_k,
                                  decode=decode)) as engine:
            engine._core.runner.padded_decode.set_whole_options(WholeStepOptions(chunk_layers=1))
            handles = engine.submit_batch([GenerateRequest(prompt=p, sampling=GREEDY) for p in PROMPTS])
            results = [h.result() for h in handles]
            counters = engine.expert_counters()
            seen[decode] = ([(r.token_ids, r.logprobs) for r in results], counters.hits, counters.misses,
                            counters.evictions, counters.h2d_bytes)
            if decode == "graphs":
                graphed = [s for s in engine._core.runner.padded_decode.by_batch.values() if s.whole is not None]
                assert any(s.batch > 1 for s in graphed), "the batched decode step did not run as whole-step graphs"
                assert all(len(s.whole) == read_args(folder).num_hidden_layers for s in graphed)
    assert seen["graphs"] == seen["static"]


def test_the_process_counts_every_decode_graph_it_captures(bf16_model_dir):
    """A graph captured after a process's first three replays slower, so `wisp bench` records the count beside each
    row: every capture counts, a re-capture after invalidate() (a re-plan's path) included."""
    from engine.runtime.decode_graphs import process_graph_captures

    folder = bf16_model_dir("qwen3_moe")
    before = process_graph_captures()
    with Engine(EngineOptions(model=str(folder), device="cuda", experts="resident", decode="graphs")) as engine:
        engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=GREEDY))
        padded = engine._core.runner.padded_decode
        captured = sum(len(s.whole or s.graphs or []) for s in padded.by_batch.values())
        assert captured >= 1 and process_graph_captures() - before == captured
        padded.invalidate()
        engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=GREEDY))
        assert process_graph_captures() - before == 2 * captured


def test_bench_rows_record_the_graphs_their_process_captured_before(tmp_path):
    from engine.bench.graph_timing import is_late_graph
    from engine.cli import main

    assert main(["bench", "--shape", "qwen3-topology-tiny", "--trace", "resources/traces/qwen3-twin_chat.npz",
                 "--budgets", "0.75,1", "--prompt", "16", "--tokens", "4", "--runs", "1", "--max-len", "128",
                 "--device", "cuda", "--arms", "resident,wisp", "--out", str(tmp_path)]) == 0
    rows = json.loads(next(tmp_path.glob("*.json")).read_text())["rows"]
    counts = [row["cuda_graphs_before"] for row in rows]
    assert [row["arm"] for row in rows] == ["resident", "wisp", "wisp"]
    assert counts == sorted(counts) and counts[0] < counts[1] < counts[2], counts  # each arm captures its own
    assert is_late_graph(rows[2]) == (counts[2] >= 3)


def test_expert_arms_bitwise_at_the_qwen3_shape(capsys):
    """At the real Qwen3-30B-A3B shape (4 layers), every arm repeats resident's tokens and logprobs bit for bit,
    through CUDA graphs and the eager path. With SDPA's decode kernels a second resident run did not repeat the
    first at 48 layers; the engine's own decode attention (engine.model.decode_attention) does."""
    from bench import identity

    status = identity.main(["--shape", "qwen3-30b-a3b", "--layers", "4", "--trace",
                            "resources/traces/qwen3-twin_code.npz", "--budget", "4.5", "--tokens", "40", "--seeds", "2",
                            "--warmup"])
    out = capsys.readouterr().out
    print(out)
    assert status == 0, out
