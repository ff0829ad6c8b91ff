"""Images -> Gemma 4's tower input, as transformers' Gemma4ImageProcessor makes it: RGB, resized with Pillow's bicubic
filter (the aspect kept) to the largest size whose sides are multiples of pooling x patch and whose patches fit
max_soft_tokens x pooling^2, scaled to [0, 1] (no mean/std: the tower maps to [-1, 1] itself), cut into patches
flattened as (row, column, channel), row-major, each with its (x, y) patch position."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from engine.errors import ModelFormatError, RequestError
from engine.vision.preprocess import to_rgb

SOFT_TOKEN_BUDGETS = (70, 140, 280, 560, 1120)  # the max_soft_tokens transformers' processor takes


@dataclass(frozen=True)
class Gemma4ImageProcessing:
    patch_size: int = 16
    pooling_kernel_size: int = 3
    max_soft_tokens: int = 280

    @classmethod
    def from_folder(cls, folder: Path, patch_size: int, pooling_kernel_size: int) -> "Gemma4ImageProcessing":
        """The image processor's settings from processor_config.json or preprocessor_config.json, else defaults."""
        for name in ("processor_config.json", "preprocessor_config.json"):
            path = folder / name
            if not path.exists():
                continue
            try:
                config = json.loads(path.read_text())
                config = config.get("image_processor", config)
                processing = cls(int(config.get("patch_size", patch_size)),
                                 int(config.get("pooling_kernel_size", pooling_kernel_size)),
                                 int(config.get("max_soft_tokens", cls.max_soft_tokens)))
            except (OSError, ValueError, TypeError, AttributeError) as err:
                raise ModelFormatError(f"{path}: not a valid image processor config ({err})") from None
            if processing.max_soft_tokens not in SOFT_TOKEN_BUDGETS:
                raise ModelFormatError(f"{path}: max_soft_tokens {processing.max_soft_tokens} is not one of "
                                       f"{SOFT_TOKEN_BUDGETS}")
            return processing
        return cls(patch_size, pooling_kernel_size)

    def size(self, width: int, height: int) -> tuple[int, int]:
        """(height, width) in pixels after resizing (transformers' get_aspect_ratio_preserving_size)."""
        side = self.pooling_kernel_size * self.patch_size
        max_patches = self.max_soft_tokens * self.pooling_kernel_size**2
        factor = math.sqrt(max_patches * self.patch_size**2 / (height * width))
        target_h = int(math.floor(factor * height / side)) * side
        target_w = int(math.floor(factor * width / side)) * side
        longest = (max_patches // self.pooling_kernel_size**2) * side
        if target_h == 0 and target_w == 0:
            raise RequestError(f"an image of {width}x{height} is too small for Gemma 4's processor", "image")
        if target_h == 0:
            target_h, target_w = side, min(int(math.floor(width / height)) * side, longest)
        elif target_w == 0:
            target_w, target_h = side, min(int(math.floor(height / width)) * side, longest)
        return target_h, target_w

    def num_tokens(self, width: int, height: int) -> int:
        """The soft tokens an image becomes: one per pooling x pooling block of patches."""
        target_h, target_w = self.size(width, height)
        return target_h * target_w // (self.patch_size * self.pooling_kernel_size) ** 2


def gemma4_preprocess(image: Image.Image, processing: Gemma4ImageProcessing) -> tuple[np.ndarray, np.ndarray]:
    """-> (patches fp32 [N, P * P * 3] in [0, 1], their (x, y) patch positions int64 [N, 2])."""
    p = processing.patch_size
    target_h, target_w = processing.size(*image.size)
    rgb = to_rgb(image)
    if rgb.size != (target_w, target_h):
        rgb = rgb.resize((target_w, target_h), resample=Image.Resampling.BICUBIC)
    pixels = (np.asarray(rgb).astype(np.float64) * (1 / 255)).astype(np.float32)  # [H, W, C]
    rows, cols = target_h // p, target_w // p
    patches = pixels.reshape(rows, p, cols, p, 3).transpose(0, 2, 1, 3, 4).reshape(rows * cols, p * p * 3)
    x, y = np.meshgrid(np.arange(cols), np.arange(rows), indexing="xy")
    return np.ascontiguousarray(patches), np.stack([x, y], -1).reshape(rows * cols, 2).astype(np.int64)
