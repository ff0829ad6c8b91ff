"""Static-shape decode (the path CUDA graphs capture), run eagerly on the CPU: same tokens as the dynamic path,
and bitwise identical across expert modes (the hybrid models' linear layers included)."""

import pytest

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.model.loader import read_args
from tests.experts.test_expert_modes import PROMPTS, mode_options

SAMPLING = SamplingParams(max_tokens=16, ignore_eos=True)


def run_all(folder, **options):
    with Engine(EngineOptions(model=str(folder), device="cpu", max_model_len=128, **options)) as engine:
        single = engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=SAMPLING))
        batch = [h.result() for h in engine.submit_batch([GenerateRequest(prompt=p, sampling=SAMPLING) for p in PROMPTS])]
    return [(r.token_ids, r.logprobs) for r in [single, *batch]]


def test_static_decode_matches_dynamic_tokens(tiny_model_dir, model_type):
    folder = tiny_model_dir(model_type)
    static, dynamic = run_all(folder, decode="static"), run_all(folder, decode="dynamic")
    assert [tokens for tokens, _ in static] == [tokens for tokens, _ in dynamic]
    for (_, a), (_, b) in zip(static, dynamic):
        assert max(abs(x - y) for x, y in zip(a, b)) < 1e-4


@pytest.mark.parametrize("name", ["qwen2_moe", "qwen3_5_moe"])
def test_static_decode_is_bitwise_equal_across_expert_modes(tiny_model_dir, name):
    folder = tiny_model_dir(name)
    args = read_args(folder)
    reference = run_all(folder, decode="static")
    for name, options in mode_options(args.num_experts_per_tok, args.num_experts).items():
        assert run_all(folder, decode="static", **options) == reference, name


@pytest.mark.parametrize("name", ["qwen3_moe", "qwen3_next"])
def test_whole_step_path_is_bitwise_equal_and_counts_like_the_host_pager(tiny_model_dir, name):
    """The path a whole-step CUDA graph captures (device LRU, miss copies by kernel, routing ring), run eagerly
    through Triton's interpreter: same outputs as the host pager, same hit/miss/eviction counts. One layer per
    chunk, so every chunk boundary (hidden states handed over in x[layer]) is on the path."""
    pytest.importorskip("triton", reason="the device pager's kernels need Triton")  # installed by the test extra
    from engine.runtime.decode_graphs import WholeStepOptions

    folder = tiny_model_dir(name)
    top_k = read_args(folder).num_experts_per_tok

    def run(whole: bool, **options):
        with Engine(EngineOptions(model=str(folder), device="cpu", max_model_len=128, decode="static",
                                  **options)) as engine:
            engine._core.runner.padded_decode.set_whole_options(WholeStepOptions(chunk_layers=1, eager=whole))
            result = engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=SAMPLING))
            batch = [h.result() for h in engine.submit_batch([GenerateRequest(prompt=p, sampling=SAMPLING)
                                                               for p in PROMPTS[:2]])]
            counters = engine.expert_counters()
            used_whole = any(getattr(s, "whole_steps", 0) for s in engine._core.runner.padded_decode.by_batch.values())
        outputs = [(r.token_ids, r.logprobs) for r in [result, *batch]]
        return outputs, (counters.hits, counters.misses, counters.evictions, counters.h2d_bytes), used_whole

    reference, _, _ = run(False)
    for options in (dict(), dict(experts="paged", expert_slots=2 * top_k), dict(experts="paged", expert_slots=top_k)):
        host_outputs, host_counts, host_whole = run(False, **options)
        whole_outputs, whole_counts, whole_used = run(True, **options)
        assert whole_used and not host_whole, options
        assert host_outputs == reference and whole_outputs == reference, options
        assert whole_counts == host_counts, options


def test_a_failing_one_graph_step_falls_back_and_loses_nothing(tiny_model_dir, monkeypatch):
    """If the pager's kernels cannot run (say Triton cannot build them for this GPU) the step is redone the
    per-layer way with a warning: same tokens, and slots that a failed copy might have left stale are dropped."""
    pytest.importorskip("triton", reason="the device pager's kernels need Triton")  # installed by the test extra
    from engine.experts.pager.device_lru import DeviceLRU
    from engine.runtime.decode_graphs import WholeStepOptions

    folder = tiny_model_dir("qwen3_moe")
    options = dict(model=str(folder), device="cpu", max_model_len=128, decode="static", experts="paged",
                   expert_slots=2 * read_args(folder).num_experts_per_tok)
    with Engine(EngineOptions(**options)) as engine:
        reference = engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=SAMPLING))

    def broken(*args, **kwargs):
        raise RuntimeError("no kernel for this GPU")

    monkeypatch.setattr(DeviceLRU, "copy_misses", broken)
    with pytest.warns(UserWarning, match="no kernel for this GPU"):
        with Engine(EngineOptions(**options)) as engine:
            engine._core.runner.padded_decode.set_whole_options(WholeStepOptions(eager=True))
            first = engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=SAMPLING))
            second = engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=SAMPLING))
    assert first.reason == second.reason == "length"
    assert (first.token_ids, first.logprobs) == (second.token_ids, second.logprobs)
    assert (first.token_ids, first.logprobs) == (reference.token_ids, reference.logprobs)
