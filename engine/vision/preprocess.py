"""Images -> the vision tower's input, as the model's own processor (transformers' Qwen2VL image processor, which
Qwen3-VL and Qwen3.5 use) makes it: RGB (transparency on white), resized with Pillow's bicubic filter to a size
smart_resize picks (sides multiples of patch x merge, pixel count within [min_pixels, max_pixels], the aspect kept),
scaled to [0, 1], normalised by mean and std, and cut into patches flattened as (channel, temporal, row, column),
the patches ordered merge block by merge block."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from engine.errors import ModelFormatError

PREPROCESSOR_FILE = "preprocessor_config.json"


@dataclass(frozen=True)
class ImageProcessing:
    patch_size: int = 16
    temporal_patch_size: int = 2
    merge_size: int = 2
    min_pixels: int = 65536
    max_pixels: int = 16777216
    image_mean: tuple[float, ...] = (0.5, 0.5, 0.5)
    image_std: tuple[float, ...] = (0.5, 0.5, 0.5)

    @classmethod
    def from_folder(cls, folder: Path, vision_config: dict) -> "ImageProcessing":
        """preprocessor_config.json where the checkpoint has one; the tower's patch sizes otherwise."""
        base = cls(patch_size=int(vision_config.get("patch_size", 16)),
                   temporal_patch_size=int(vision_config.get("temporal_patch_size", 2)),
                   merge_size=int(vision_config.get("spatial_merge_size", 2)))
        path = folder / PREPROCESSOR_FILE
        if not path.exists():
            return base
        try:
            config = json.loads(path.read_text())
            size = config.get("size") or {}
            return cls(patch_size=int(config.get("patch_size", base.patch_size)),
                       temporal_patch_size=int(config.get("temporal_patch_size", base.temporal_patch_size)),
                       merge_size=int(config.get("merge_size", base.merge_size)),
                       min_pixels=int(size.get("shortest_edge", config.get("min_pixels", base.min_pixels))),
                       max_pixels=int(size.get("longest_edge", config.get("max_pixels", base.max_pixels))),
                       image_mean=tuple(config.get("image_mean", base.image_mean)),
                       image_std=tuple(config.get("image_std", base.image_std)))
        except (OSError, ValueError, TypeError, AttributeError) as err:
            raise ModelFormatError(f"{path}: not a valid image processor config ({err})") from None

    def grid(self, width: int, height: int) -> tuple[int, int, int]:
        """(t, h, w) in patches of an image of this size after resizing."""
        resized_height, resized_width = smart_resize(height, width, self.patch_size * self.merge_size,
                                                     self.min_pixels, self.max_pixels)
        return 1, resized_height // self.patch_size, resized_width // self.patch_size

    def num_tokens(self, width: int, height: int) -> int:
        """The language-model tokens the image becomes: one per merged block of patches."""
        t, h, w = self.grid(width, height)
        return t * h * w // self.merge_size**2


def smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """transformers' rule: sides rounded to multiples of factor; scaled down (floor) above max_pixels or up (ceil)
    below min_pixels, keeping the aspect ratio."""
    h_bar, w_bar = round(height / factor) * factor, round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar, w_bar = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def to_rgb(image: Image.Image) -> Image.Image:
    """RGB, with any transparency composited onto white (as transformers' convert_to_rgb does)."""
    if "A" in image.getbands() or image.info.get("transparency") is not None:
        rgba = image.convert("RGBA")
        return Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba).convert("RGB")
    return image.convert("RGB")


def preprocess(image: Image.Image, processing: ImageProcessing) -> tuple[np.ndarray, tuple[int, int, int]]:
    """-> (patches fp32 [t*h*w, 3 * temporal * patch * patch], (t, h, w))."""
    p = processing
    t, grid_h, grid_w = p.grid(*image.size)
    resized = to_rgb(image).resize((grid_w * p.patch_size, grid_h * p.patch_size), resample=Image.Resampling.BICUBIC)
    pixels = (np.asarray(resized).astype(np.float64) * (1 / 255)).astype(np.float32)  # [H, W, C]
    pixels = (pixels - np.asarray(p.image_mean, np.float32)) / np.asarray(p.image_std, np.float32)
    return patchify(pixels.transpose(2, 0, 1), p), (t, grid_h, grid_w)


def patchify(image: np.ndarray, p: ImageProcessing) -> np.ndarray:
    """image [C, H, W] -> [grid_h * grid_w, C * temporal * patch * patch]; a still image fills every temporal slot."""
    channels, height, width = image.shape
    grid_h, grid_w, m, s = height // p.patch_size, width // p.patch_size, p.merge_size, p.patch_size
    patches = image.reshape(channels, grid_h // m, m, s, grid_w // m, m, s).transpose(1, 4, 2, 5, 0, 3, 6)
    patches = np.broadcast_to(patches[:, :, :, :, :, None], (*patches.shape[:5], p.temporal_patch_size, s, s))
    return np.ascontiguousarray(patches).reshape(grid_h * grid_w, channels * p.temporal_patch_size * s * s)
