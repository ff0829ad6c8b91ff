"""Gemma 4's images on CUDA: `pytest -m gpu tests/gpu/test_gemma4_vision.py`; fails (not skips) without a GPU. The
tiny gemma4 vision-language checkpoint (tests/vision/tiny_gemma4.py): fp32 greedy tokens equal transformers' on CUDA
(their logprobs within 1e-3); in bf16 token ids and logprobs are bitwise identical in every expert mode, with a text
stream batched beside the image ones; the tower sits on the device in the compute dtype."""

from __future__ import annotations

import pytest
import torch

from engine.api import Engine, EngineOptions
from tests.experts.test_expert_modes import mode_options
from tests.gpu.test_vision import outputs as vision_outputs
from tests.vision.test_vl_tokens import CONVERSATIONS, GREEDY, MAX_TOKENS
from tests.vision.tiny_gemma4 import reference_inputs, write_tiny_gemma4_vl

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def gemma4_dir(tmp_path_factory):
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    return write_tiny_gemma4_vl(tmp_path_factory.mktemp("tiny_gemma4_vl_cuda"))


def outputs(folder, dtype: str, conversations, **options):
    return vision_outputs(folder, dtype, conversations, GREEDY, **options)


@pytest.mark.parametrize("name", list(CONVERSATIONS))
def test_fp32_greedy_tokens_match_transformers_on_cuda(gemma4_dir, name):
    from transformers import AutoModelForImageTextToText

    messages = CONVERSATIONS[name]
    (tokens, logprobs), = outputs(gemma4_dir, "float32", [messages])
    images = [part["image"] for m in messages if isinstance(m["content"], list) for part in m["content"]
              if part["type"] == "image"]
    inputs = {key: value.to("cuda") for key, value in reference_inputs(gemma4_dir, messages, images).items()}
    model = AutoModelForImageTextToText.from_pretrained(gemma4_dir, dtype=torch.float32).to("cuda").eval()
    out = model.generate(**inputs, max_new_tokens=MAX_TOKENS, do_sample=False, output_logits=True,
                         return_dict_in_generate=True)
    reference = out.sequences[0, inputs["input_ids"].shape[1]:].tolist()
    assert list(tokens) == reference
    expected = [torch.log_softmax(step[0].float(), -1)[token].item() for step, token in zip(out.logits, reference)]
    assert list(logprobs) == pytest.approx(expected, abs=1e-3)


def test_bf16_bitwise_across_expert_modes_with_a_text_stream_beside(gemma4_dir):
    batch = [*CONVERSATIONS.values(), [{"role": "user", "content": "def fib(n):"}]]
    reference = outputs(gemma4_dir, "bfloat16", batch)
    for name, options in mode_options(top_k=2, num_experts=8).items():
        assert outputs(gemma4_dir, "bfloat16", batch, **options) == reference, name


def test_the_tower_runs_in_the_compute_dtype_on_the_device(gemma4_dir):
    with Engine(EngineOptions(model=str(gemma4_dir), device="cuda", dtype="bfloat16")) as engine:
        tower = engine._core.runner.vision.tower
        assert {p.dtype for p in tower.parameters()} == {torch.bfloat16}
        assert {p.device.type for p in tower.parameters()} == {"cuda"}
