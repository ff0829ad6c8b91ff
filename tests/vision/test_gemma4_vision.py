"""Gemma 4's vision tower (a tiny random-weight gemma4 vision-language checkpoint): images preprocessed as
transformers' Gemma 4 image processor does, bit for bit; greedy tokens for image+text prompts equal transformers'
(CPU, fp32), its image tokens attending to each other both ways in the sliding layers, also when prompt chunks would
cut an image."""

import io

import numpy as np
import pytest
from PIL import Image

from engine.api import Engine, EngineOptions, GenerateRequest
from engine.vision.gemma4_preprocess import Gemma4ImageProcessing, gemma4_preprocess
from tests.vision.tiny_gemma4 import reference_image_processor, reference_inputs
from tests.vision.test_vl_tokens import CONVERSATIONS, GREEDY, MAX_TOKENS
from tests.vision.tiny_vl import encoded_image



@pytest.mark.parametrize("size, mode, budget", [((70, 50), "RGB", 70), ((400, 120), "RGB", 280),
                                                 ((150, 90), "RGBA", 140), ((20, 600), "RGB", 70),
                                                 ((1000, 800), "RGB", 1120)])
def test_preprocessing_equals_transformers(size, mode, budget):
    from transformers.models.gemma4.image_processing_pil_gemma4 import Gemma4ImageProcessorPil

    image = Image.open(io.BytesIO(encoded_image(*size, 1, mode=mode)))
    reference = Gemma4ImageProcessorPil(max_soft_tokens=budget)([image], return_tensors="np")
    processing = Gemma4ImageProcessing(max_soft_tokens=budget)
    patches, positions = gemma4_preprocess(image, processing)
    count = patches.shape[0]
    assert processing.num_tokens(*size) == reference["num_soft_tokens_per_image"][0]
    assert np.array_equal(reference["pixel_values"][0][:count], patches)
    assert np.array_equal(reference["image_position_ids"][0][:count], positions)
    assert (reference["image_position_ids"][0][count:] == -1).all()


def reference_outputs(folder, messages) -> tuple[list[int], list[float]]:
    """transformers' greedy tokens and their logprobs."""
    import torch
    from transformers import AutoModelForImageTextToText

    images = [part["image"] for m in messages if isinstance(m["content"], list) for part in m["content"]
              if part["type"] == "image"]
    inputs = reference_inputs(folder, messages, images)
    model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32).eval()
    out = model.generate(**inputs, max_new_tokens=MAX_TOKENS, do_sample=False, output_logits=True,
                         return_dict_in_generate=True)
    tokens = out.sequences[0, inputs["input_ids"].shape[1]:].tolist()
    logprobs = [torch.log_softmax(step[0].float(), -1)[token].item() for step, token in zip(out.logits, tokens)]
    return tokens, logprobs


def wisp_outputs(folder, messages, **options) -> tuple[list[int], list[float]]:
    with Engine(EngineOptions(model=str(folder), device="cpu", dtype="float32", **options)) as engine:
        assert engine.sees_images
        finish = engine.generate(GenerateRequest(messages=tuple(messages), sampling=GREEDY))
    assert finish.reason != "error", finish.error
    return list(finish.token_ids), list(finish.logprobs)


@pytest.mark.parametrize("name", list(CONVERSATIONS))
def test_greedy_tokens_and_logprobs_match_transformers(tiny_gemma4_dir, name):
    """The logprobs too: the tiny model's greedy tokens alone barely depend on the image tokens' mask."""
    tokens, logprobs = wisp_outputs(tiny_gemma4_dir, CONVERSATIONS[name])
    reference_tokens, reference_logprobs = reference_outputs(tiny_gemma4_dir, CONVERSATIONS[name])
    assert tokens == reference_tokens
    assert logprobs == pytest.approx(reference_logprobs, abs=1e-4)


def test_a_chunk_that_would_cut_an_image_keeps_it_whole(tiny_gemma4_dir):
    """Chunks of 8 tokens: each image's soft tokens (12 and 45 here) run in one chunk, as they attend both ways."""
    messages = CONVERSATIONS["two images then text"]
    tokens, logprobs = wisp_outputs(tiny_gemma4_dir, messages, prefill_chunk=8)
    whole_tokens, whole_logprobs = wisp_outputs(tiny_gemma4_dir, messages)
    assert tokens == whole_tokens and logprobs == pytest.approx(whole_logprobs, abs=1e-5)  # other GEMM shapes


def test_the_processor_config_is_read(tiny_gemma4_dir):
    processing = Gemma4ImageProcessing.from_folder(tiny_gemma4_dir, 16, 3)
    assert processing == Gemma4ImageProcessing(16, 3, reference_image_processor().max_soft_tokens)


def test_the_plan_counts_the_towers_weights(tiny_gemma4_dir):
    import json

    import torch

    from engine.model.config_file import read_args
    from engine.vision.gemma4_args import gemma4_num_params, gemma4_vision_args
    from engine.vision.gemma4_tower import Gemma4VisionTower

    args = gemma4_vision_args(json.loads((tiny_gemma4_dir / "config.json").read_text()))
    with torch.device("meta"):
        tower = Gemma4VisionTower(args)
    assert gemma4_num_params(args) == sum(p.numel() for p in tower.parameters())
    assert read_args(tiny_gemma4_dir).extra["vision_params"] == gemma4_num_params(args)


def test_a_second_turn_reuses_the_cached_image_blocks_with_the_same_outputs(tiny_gemma4_dir):
    """Blocks of 4: both images' tokens come from the cache (their keys and values computed with each image whole
    in view); the rest of the prompt attends to them as a fresh run does."""
    first = CONVERSATIONS["two images then text"]
    with Engine(EngineOptions(model=str(tiny_gemma4_dir), device="cpu", dtype="float32", block_size=4)) as engine:
        reply = engine.generate(GenerateRequest(messages=tuple(first), sampling=GREEDY))
        second = (*first, {"role": "assistant", "content": reply.text}, {"role": "user", "content": "def fib"})
        cached = engine.generate(GenerateRequest(messages=second, sampling=GREEDY))
    assert cached.stats.cached_prompt_tokens >= 12 + 45
    tokens, logprobs = wisp_outputs(tiny_gemma4_dir, second)
    assert list(cached.token_ids) == tokens and list(cached.logprobs) == pytest.approx(logprobs, abs=1e-5)
