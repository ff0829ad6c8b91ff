"""Overlapped decode steps on CUDA graphs (H200: `pytest -m gpu tests/gpu/test_overlap.py`): each step launched on
the last one's sampled tokens before the host reads them gives bitwise the tokens and logprobs of steps run one at
a time, in every expert mode, for greedy and seeded sampling, alone and in a batch, a hybrid model included (its
rows step ahead too)."""

from __future__ import annotations

import pytest
import torch

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.model.loader import read_args
from tests.experts.test_expert_modes import PROMPTS, mode_options
from tests.tiny_models import write_tiny_model

pytestmark = pytest.mark.gpu

SAMPLINGS = (SamplingParams(max_tokens=40, ignore_eos=True, top_logprobs=2),
             SamplingParams(max_tokens=33, temperature=0.8, top_k=40, top_p=0.9, seed=3, ignore_eos=True),
             SamplingParams(max_tokens=7, ignore_eos=True))


def run(folder, overlap: bool, **options) -> tuple[list, int]:
    with Engine(EngineOptions(model=str(folder), device="cuda", decode="graphs", **options)) as engine:
        engine._core.overlap = overlap
        alone = [engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=s)) for s in SAMPLINGS]
        batch = [h.result() for h in engine.submit_batch(
            [GenerateRequest(prompt=PROMPTS[i % len(PROMPTS)], sampling=s) for i, s in enumerate(SAMPLINGS)])]
        ahead = engine._core.steps_ahead
    assert all(r.error is None for r in alone + batch)
    return [(r.token_ids, r.logprobs, r.reason) for r in alone + batch], ahead


@pytest.mark.parametrize("name", ["qwen3_moe", "qwen3_5_moe"])  # the second a hybrid
def test_overlapped_steps_are_bitwise_equal_on_cuda(tmp_path, name):
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    folder = write_tiny_model(tmp_path / name, name, dtype=torch.bfloat16)
    args = read_args(folder)
    reference, none_ahead = run(folder, overlap=False)
    assert none_ahead == 0
    for mode, options in {"resident": {}, **mode_options(args.num_experts_per_tok, args.num_experts)}.items():
        overlapped, ahead = run(folder, overlap=True, **options)
        assert ahead > 50, mode
        assert overlapped == reference, mode
