"""Gemma 4's mmproj file as `wisp convert-gguf --mmproj` writes it runs in llama.cpp (llama-cpp-python's mtmd): for
an image that neither resizes (480x336: the tiny processor's 70 soft tokens, within llama.cpp's 40 to 280), llama.cpp's
image embeddings equal Wisp's tower's to 2e-3 of their largest (llama.cpp's CPU GELU reads a table of f16 inputs, as
tests/gguf/test_gemma4_gguf.py says of the language model), where a tower run with another rotary base is off by a
fifth of it or more."""

import io
from dataclasses import replace

import numpy as np
import pytest
import torch
from PIL import Image

from engine.gguf.mmproj_tower import load_mmproj_vision
from engine.text.tokenizer import Tokenizer
from engine.vision.gemma4_preprocess import gemma4_preprocess
from engine.vision.gemma4_tower import Gemma4VisionTower
from tests.vision.tiny_vl import encoded_image

pytest.importorskip("llama_cpp.mtmd_cpp", reason="llama-cpp-python without its mtmd bindings")
MMPROJ = "mmproj-tiny-f32.gguf"


def wisp_embeddings(tiny_gemma4_dir, model, image: Image.Image, **changes) -> np.ndarray:
    tokenizer = Tokenizer.from_folder(tiny_gemma4_dir)
    vision = load_mmproj_vision(model.parent / MMPROJ, model, 64, tokenizer.token_to_id, torch.device("cpu"),
                                torch.float32)
    if changes:
        vision.tower.args = replace(vision.tower.args, **changes)
        vision.tower.inv_freq = Gemma4VisionTower.rotary_frequencies(vision.tower.args)
    patches, positions = gemma4_preprocess(image, vision.processing)
    assert len(patches) == image.width * image.height // 16**2  # not resized
    grid = (1, int(positions[:, 1].max()) + 1, int(positions[:, 0].max()) + 1)
    with torch.inference_mode():
        return vision.tower(torch.from_numpy(patches), [grid]).numpy()


def test_llama_cpp_gives_the_towers_image_embeddings(tiny_gemma4_dir, tiny_gemma4_gguf):
    from tests.vision.llama_cpp_images import llama_cpp_image_embeddings

    image = Image.open(io.BytesIO(encoded_image(480, 336, 4))).convert("RGB")
    theirs = llama_cpp_image_embeddings(tiny_gemma4_gguf, tiny_gemma4_gguf.parent / MMPROJ, np.asarray(image))
    ours = wisp_embeddings(tiny_gemma4_dir, tiny_gemma4_gguf, image)
    assert theirs.shape == ours.shape == (70, 64)
    assert np.abs(theirs - ours).max() < 2e-3 * np.abs(ours).max()
    wrong = wisp_embeddings(tiny_gemma4_dir, tiny_gemma4_gguf, image, rope_theta=10000.0)
    assert np.abs(theirs - wrong).max() > 0.2 * np.abs(ours).max()
