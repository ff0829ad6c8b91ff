"""A tiny random-weight qwen3_5_moe vision-language checkpoint gives transformers' greedy tokens for image+text
prompts (CPU, fp32), in every expert mode."""

import pytest
import torch

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from tests.experts.test_expert_modes import mode_options
from tests.vision.tiny_vl import encoded_image, reference_inputs

MAX_TOKENS = 8
GREEDY = SamplingParams(temperature=0.0, max_tokens=MAX_TOKENS, ignore_eos=True)
IMAGES = [encoded_image(70, 50, 1), encoded_image(40, 120, 2), encoded_image(150, 90, 3, mode="RGBA")]
CONVERSATIONS = {
    "one image": [{"role": "user", "content": [{"type": "image", "image": IMAGES[0]},
                                               {"type": "text", "text": "def fib(n):"}]}],
    "two images then text": [{"role": "user", "content": [
        {"type": "image", "image": IMAGES[1]}, {"type": "image", "image": IMAGES[2]},
        {"type": "text", "text": "The quick brown fox"}]}],
    "text, image, text": [
        {"role": "user", "content": "class Stack:"},
        {"role": "assistant", "content": "def push(self, item):"},
        {"role": "user", "content": [{"type": "text", "text": "héllo"}, {"type": "image", "image": IMAGES[2]},
                                     {"type": "text", "text": "wörld"}]}],
}


def reference_tokens(folder, messages, device: str = "cpu") -> list[int]:
    """transformers' greedy tokens, on device (on a CUDA machine its linear-attention layers take fla's Triton
    kernels, which read CUDA tensors only)."""
    from transformers import AutoModelForImageTextToText

    images = [part["image"] for m in messages if isinstance(m["content"], list) for part in m["content"]
              if part["type"] == "image"]
    inputs = {key: value.to(device) for key, value in reference_inputs(folder, messages, images).items()}
    model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32).to(device).eval()
    out = model.generate(**inputs, max_new_tokens=MAX_TOKENS, do_sample=False)
    return out[0, inputs["input_ids"].shape[1]:].tolist()


def wisp_tokens(folder, messages, **options) -> list[int]:
    with Engine(EngineOptions(model=str(folder), device="cpu", dtype="float32", **options)) as engine:
        assert engine.sees_images
        finish = engine.generate(GenerateRequest(messages=tuple(messages), sampling=GREEDY))
    assert finish.reason != "error", finish.error
    return list(finish.token_ids)


FOLDERS = {"qwen3_5_moe": "tiny_vl_dir", "qwen3_vl_moe": "tiny_vl_moe_dir"}  # tests/vision/conftest.py


@pytest.fixture(params=list(FOLDERS))
def vl_dir(request):
    return request.getfixturevalue(FOLDERS[request.param])


@pytest.mark.parametrize("name", list(CONVERSATIONS))
def test_greedy_tokens_match_transformers(vl_dir, name):
    messages = CONVERSATIONS[name]
    assert wisp_tokens(vl_dir, messages) == reference_tokens(vl_dir, messages)


@pytest.mark.parametrize("model_type", ["qwen3_5_moe", pytest.param("qwen3_vl_moe", marks=pytest.mark.slow)])
def test_same_tokens_in_every_expert_mode(request, model_type):
    """Seven engines: qwen3_vl_moe's run with the slow tests (tests/experts covers its text in every mode)."""
    vl_dir = request.getfixturevalue(FOLDERS[model_type])
    messages = CONVERSATIONS["two images then text"]
    reference = wisp_tokens(vl_dir, messages)
    for name, options in mode_options(top_k=2, num_experts=8).items():
        assert wisp_tokens(vl_dir, messages, **options) == reference, name


def test_a_prompt_chunked_inside_an_image_gives_the_same_tokens(tiny_vl_moe_dir):
    """Chunks of 8 tokens split the images' 4 + 12 tokens: the tower runs once per image, each chunk takes its rows
    of the embeddings, the deepstack features and the M-RoPE positions."""
    messages = CONVERSATIONS["two images then text"]
    assert wisp_tokens(tiny_vl_moe_dir, messages, prefill_chunk=8) == wisp_tokens(tiny_vl_moe_dir, messages)


def test_a_second_turn_reuses_the_cached_image_blocks_with_the_same_tokens(tiny_vl_moe_dir):
    first = CONVERSATIONS["two images then text"]
    with Engine(EngineOptions(model=str(tiny_vl_moe_dir), device="cpu", dtype="float32", block_size=4)) as engine:
        reply = engine.generate(GenerateRequest(messages=tuple(first), sampling=GREEDY))
        second = (*first, {"role": "assistant", "content": reply.text}, {"role": "user", "content": "def fib"})
        cached = engine.generate(GenerateRequest(messages=second, sampling=GREEDY))
    assert cached.stats.cached_prompt_tokens >= 16
    assert list(cached.token_ids) == wisp_tokens(tiny_vl_moe_dir, second)


@pytest.mark.parametrize("name", ["one image", "text, image, text"])
def test_static_decode_after_an_image_gives_the_same_tokens_through_the_padded_step(vl_dir, name, monkeypatch):
    """After an image M-RoPE's position axes move together, so decode steps take the static-shape path (CUDA graphs
    on CUDA) with the rotary position offset by the image's rope_delta."""
    from engine.runtime.model_runner import ModelRunner

    padded = []
    original = ModelRunner.decode_padded
    monkeypatch.setattr(ModelRunner, "decode_padded",
                        lambda self, seqs, *a, **k: padded.append(len(seqs)) or original(self, seqs, *a, **k))
    messages = CONVERSATIONS[name]
    assert wisp_tokens(vl_dir, messages, decode="static") == wisp_tokens(vl_dir, messages, decode="dynamic")
    assert len(padded) >= MAX_TOKENS - 1
