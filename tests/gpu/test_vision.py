"""Images on CUDA: `pytest -m gpu tests/gpu/test_vision.py`; fails (not skips) without a GPU. The tiny qwen3_5_moe
vision-language checkpoint (tests/vision/tiny_vl.py): fp32 greedy tokens equal transformers' for image+text prompts;
in bf16 (the tower in the compute dtype too) token ids and logprobs are bitwise identical in every expert mode, also
with a text stream batched beside the image one; the tower's weights stay on the device within the budget."""

from __future__ import annotations

import pytest
import torch

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from tests.experts.test_expert_modes import mode_options
from tests.vision.test_vl_tokens import CONVERSATIONS, reference_tokens
from tests.vision.tiny_vl import write_tiny_vl

pytestmark = pytest.mark.gpu
GREEDY = SamplingParams(temperature=0.0, max_tokens=16, ignore_eos=True)


@pytest.fixture(scope="module")
def vl_dir(tmp_path_factory):
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    return write_tiny_vl(tmp_path_factory.mktemp("tiny_vl_cuda"))


def outputs(folder, dtype: str, conversations, sampling: SamplingParams = GREEDY, **options):
    with Engine(EngineOptions(model=str(folder), device="cuda", dtype=dtype, **options)) as engine:
        assert engine.sees_images
        handles = [engine.submit(GenerateRequest(messages=tuple(m), sampling=sampling)) for m in conversations]
        finishes = [handle.result() for handle in handles]
    assert all(f.reason == "length" for f in finishes), [f.error for f in finishes]
    return [(f.token_ids, f.logprobs) for f in finishes]


@pytest.mark.parametrize("name", list(CONVERSATIONS))
def test_fp32_greedy_tokens_match_transformers_on_cuda(vl_dir, name):
    from tests.vision import test_vl_tokens

    (tokens, _), = outputs(vl_dir, "float32", [CONVERSATIONS[name]])
    assert list(tokens[: test_vl_tokens.MAX_TOKENS]) == reference_tokens(vl_dir, CONVERSATIONS[name], "cuda")


def test_bf16_bitwise_across_expert_modes_with_a_text_stream_beside(vl_dir):
    batch = [*CONVERSATIONS.values(), [{"role": "user", "content": "def fib(n):"}]]
    reference = outputs(vl_dir, "bfloat16", batch)
    for name, options in mode_options(top_k=2, num_experts=8).items():
        assert outputs(vl_dir, "bfloat16", batch, **options) == reference, name


def test_the_tower_runs_in_the_compute_dtype_on_the_device(vl_dir):
    with Engine(EngineOptions(model=str(vl_dir), device="cuda", dtype="bfloat16")) as engine:
        tower = engine._core.runner.vision.tower
        assert {p.dtype for p in tower.parameters()} == {torch.bfloat16}
        assert {p.device.type for p in tower.parameters()} == {"cuda"}
