"""Speculative decoding on CUDA (the lent GPU: `pytest -m gpu -p no:xdist tests/gpu/test_speculative_gpu.py`):
decode and verify steps on CUDA graphs (verify steps eagerly past the static row counts), greedy token ids equal to
decoding without drafts in every expert mode, logprobs within 1e-4 in fp32, a hybrid model's states rolled back; a
verify step's rows take the decode kernel (MLA's absorbed latent decode too, a hybrid's chained Gated DeltaNet
kernels), so in bf16 as well the ids are those of one-token steps."""

from __future__ import annotations

import pytest
import torch

from engine.model.loader import read_args
from tests.experts.test_expert_modes import mode_options
from tests.runtime.test_speculative_engine import PROMPTS, OracleDrafts, requests
from tests.tiny_models import write_tiny_model
from engine.api import Engine, EngineOptions, SamplingParams

pytestmark = pytest.mark.gpu
GREEDY = SamplingParams(max_tokens=32, ignore_eos=True)


def run(folder, reference=None, on_close=None, **options):
    """on_close({rows: whether its static step captured graphs}) before the engine closes."""
    with Engine(EngineOptions(model=str(folder), device="cuda", decode="graphs", **options)) as engine:
        if reference is not None:
            engine._core.speculation.propose = OracleDrafts(engine, reference)
        results = [h.result() for h in engine.submit_batch(requests(PROMPTS, GREEDY))]
        if on_close is not None:
            on_close({rows: static.captures > 0 for rows, static in engine._core.runner.padded_decode.by_batch.items()})
    assert all(r.error is None for r in results), [r.error for r in results]
    return {r.request_id: (list(r.token_ids), list(r.logprobs)) for r in results}, \
        sum(r.stats.spec_accepted for r in results)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", ["qwen3_moe", "qwen3_5_moe", "deepseek_v3"])  # GQA, hybrid, MLA
def test_drafting_is_lossless_on_cuda_in_every_expert_mode(tmp_path, name, dtype):
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    folder = write_tiny_model(tmp_path / name, name, dtype=dtype)
    args = read_args(folder)
    modes = {"resident": {}, **mode_options(args.num_experts_per_tok, args.num_experts)}
    plain, _ = run(folder)
    reference = {rid: ids for rid, (ids, _) in plain.items()}
    for mode, options in modes.items():
        drafted, accepted = run(folder, reference, speculative="ngram", **options)
        assert accepted > 0, mode
        for rid, (ids, logprobs) in plain.items():
            assert drafted[rid][0] == ids, (mode, rid)
            if dtype == torch.float32:
                assert drafted[rid][1] == pytest.approx(logprobs, abs=1e-4), (mode, rid)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", ["qwen3_moe", "deepseek_v3", "qwen3_5_moe", "qwen3_next"])  # GQA, MLA, hybrids
def test_verify_steps_replay_cuda_graphs_and_are_lossless(tmp_path, name, dtype, monkeypatch):
    """Verify drafts as rows of the padded decode step: every verify step takes the static path, row counts other
    than the batch's get graphs of their own, and the ids are those of decoding without drafts in every expert mode.
    The hybrids' Gated DeltaNet layers step a sequence's rows in order inside the graphs (the fused kernels' chains)
    and roll back to the scratch state of the last accepted row (OracleDrafts spoils every third step's last
    draft)."""
    from tests.runtime.test_static_verify import StepPaths

    assert torch.cuda.is_available(), "GPU tests need CUDA"
    folder = write_tiny_model(tmp_path / name, name, dtype=dtype)
    args = read_args(folder)
    sizes = dict(max_num_seqs=16, draft_tokens=4)  # 3 sequences of up to 5 rows: every verify step fits
    plain, _ = run(folder, **sizes)
    reference = {rid: ids for rid, (ids, _) in plain.items()}
    for mode, options in {"resident": {}, **mode_options(args.num_experts_per_tok, args.num_experts)}.items():
        paths = StepPaths(monkeypatch)
        graphs = []
        drafted, accepted = run(folder, reference, speculative="ngram", on_close=graphs.append, **sizes, **options)
        assert accepted > 0 and paths.padded > 0 and paths.dynamic == 0, mode
        assert any(rows > len(PROMPTS) and captured for rows, captured in graphs[0].items()), (mode, graphs)
        for rid, (ids, logprobs) in plain.items():
            assert drafted[rid][0] == ids, (mode, rid)
            if dtype == torch.float32:
                assert drafted[rid][1] == pytest.approx(logprobs, abs=1e-4), (mode, rid)
