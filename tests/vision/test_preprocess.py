"""Wisp's Pillow preprocessing gives transformers' pixel_values and image_grid_thw (its PIL image processor, the one
installed without torchvision), and the number of image tokens its processor would place."""

import io

import numpy as np
import pytest
from PIL import Image

from engine.vision.preprocess import ImageProcessing, preprocess, smart_resize
from tests.vision.tiny_vl import encoded_image

CASES = [  # (width, height, mode, format, min_pixels, max_pixels)
    (70, 50, "RGB", "PNG", 32 * 32, 96 * 96),
    (40, 120, "RGB", "JPEG", 32 * 32, 96 * 96),
    (150, 90, "RGBA", "PNG", 32 * 32, 96 * 96),  # transparency composited on white
    (333, 517, "L", "PNG", 56 * 56, 28 * 28 * 1280),  # grey; scaled up past min_pixels
    (1000, 700, "P", "GIF", 56 * 56, 256 * 256),  # palette; scaled down to max_pixels
    (256, 256, "RGB", "WEBP", 65536, 16777216),  # Qwen3.5's published limits
]


@pytest.mark.parametrize("width, height, mode, fmt, min_pixels, max_pixels", CASES)
def test_pixel_values_and_grid_match_transformers(width, height, mode, fmt, min_pixels, max_pixels):
    from transformers import Qwen2VLImageProcessorPil

    data = encoded_image(width, height, seed=width, mode=mode, fmt=fmt)
    reference = Qwen2VLImageProcessorPil(patch_size=16, temporal_patch_size=2, merge_size=2,
                                         size={"shortest_edge": min_pixels, "longest_edge": max_pixels},
                                         image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
    expected = reference(Image.open(io.BytesIO(data)), return_tensors="np")
    processing = ImageProcessing(16, 2, 2, min_pixels, max_pixels)
    pixels, grid = preprocess(Image.open(io.BytesIO(data)), processing)
    assert [list(grid)] == expected["image_grid_thw"].tolist()
    assert pixels.dtype == np.float32 and pixels.shape == expected["pixel_values"].shape
    np.testing.assert_array_equal(pixels, expected["pixel_values"])
    assert processing.num_tokens(width, height) == reference.get_number_of_image_patches(height, width) // 4


def test_clip_statistics_and_patch_size_14_match_transformers():
    from transformers import Qwen2VLImageProcessorPil

    data = encoded_image(300, 200, seed=7)
    reference = Qwen2VLImageProcessorPil()  # Qwen2-VL's defaults: patch 14, OpenAI CLIP mean and std
    expected = reference(Image.open(io.BytesIO(data)), return_tensors="np")
    processing = ImageProcessing(14, 2, 2, 56 * 56, 28 * 28 * 1280, tuple(reference.image_mean),
                                 tuple(reference.image_std))
    pixels, grid = preprocess(Image.open(io.BytesIO(data)), processing)
    np.testing.assert_array_equal(pixels, expected["pixel_values"])
    assert [list(grid)] == expected["image_grid_thw"].tolist()


def test_processor_config_is_read_from_the_checkpoint(tiny_vl_dir):
    processing = ImageProcessing.from_folder(tiny_vl_dir, {})
    assert (processing.min_pixels, processing.max_pixels, processing.patch_size) == (32 * 32, 96 * 96, 16)


@pytest.mark.parametrize("height, width", [(50, 70), (1080, 1920), (10, 1900), (4000, 3000)])
def test_smart_resize_keeps_multiples_and_limits(height, width):
    h, w = smart_resize(height, width, 32, 32 * 32 * 4, 32 * 32 * 256)
    assert h % 32 == w % 32 == 0 and 32 * 32 * 4 <= h * w <= 32 * 32 * 256
