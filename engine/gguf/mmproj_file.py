"""An mmproj file (`mmproj-*.gguf`): the vision tower llama.cpp's converter writes beside a vision-language model's
GGUF file (architecture `clip`, keys clip.vision.*), read with the gguf package into Wisp's tower arguments and image
processing. Wisp runs two projectors: `qwen3vl_merger` (the towers of Qwen3-VL and Qwen3.5 / 3.6, read here) and
`gemma4v` (Gemma 4's tower: engine.gguf.mmproj_gemma4). Torch-free (the planner counts the tower from here);
engine.gguf.mmproj_tower loads the weights."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import numpy as np

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.vision.preprocess import ImageProcessing
from engine.vision.vision_args import VisionArgs

ARCHITECTURE = "clip"
QWEN_PROJECTOR = "qwen3vl_merger"  # gguf.VisionProjectorType.QWEN3VL: Qwen3-VL's and Qwen3.5's towers
GEMMA4_PROJECTOR = "gemma4v"  # gguf.VisionProjectorType.GEMMA4V: Gemma 4's tower
PROJECTORS = {QWEN_PROJECTOR: "Qwen3-VL and Qwen3.5", GEMMA4_PROJECTOR: "Gemma 4"}  # projector -> whose tower
IMAGE_TOKEN, VISION_START_TOKEN = "<|image_pad|>", "<|vision_start|>"  # the language model's, found by their text
# Qwen3-VL's and Qwen3.5's preprocessor_config.json: what an mmproj without clip.vision.image_{min,max}_pixels gets
PUBLISHED_MIN_PIXELS, PUBLISHED_MAX_PIXELS = 65536, 16777216


class MmprojFile:
    """Open with `MmprojFile(path)`; ModelFormatError / UnsupportedModelError naming the file for one that is not a
    vision tower Wisp runs. Tensors are read when asked for."""

    def __init__(self, path: Path | str):
        import gguf

        self.path = Path(path)
        try:
            self.reader = gguf.GGUFReader(self.path)
        except (OSError, ValueError, IndexError) as error:
            raise ModelFormatError(f"{self.path}: not a readable GGUF file ({error})") from None
        self.tensors = {tensor.name: tensor for tensor in self.reader.tensors}
        self.check_kind()

    def get(self, key: str, default=None):
        field = self.reader.get_field(key)
        return default if field is None else field.contents()

    def number(self, key: str, default=None):
        value = self.get(key, default)
        if value is None:
            raise ModelFormatError(f"{self.path}: the mmproj file lacks '{key}'")
        return value

    def check_kind(self) -> None:
        arch = self.get("general.architecture")
        if arch != ARCHITECTURE:
            raise ModelFormatError(f"{self.path}: not an mmproj file (its architecture is '{arch}', an mmproj's is "
                                   f"'{ARCHITECTURE}'): pass the vision tower's mmproj-*.gguf, not a model file")
        if not self.get("clip.has_vision_encoder", False):
            raise UnsupportedModelError(f"{self.path}: the mmproj file has no vision encoder (an audio one only?)")
        self.projector = self.get("clip.vision.projector_type") or self.get("clip.projector_type")
        if self.projector not in PROJECTORS:
            known = ", ".join(f"{models} ({name})" for name, models in PROJECTORS.items())
            raise UnsupportedModelError(f"{self.path}: Wisp runs the vision towers of {known}, not projector "
                                        f"'{self.projector}'")

    def check_projector(self, projector: str, model_name: str) -> None:
        """ModelFormatError naming both files when the tower is another model's (a Qwen tower for Gemma 4)."""
        if self.projector != projector:
            raise ModelFormatError(f"{self.path}: this is {PROJECTORS[self.projector]}'s vision tower (projector "
                                   f"'{self.projector}'), but {model_name} takes {PROJECTORS.get(projector, projector)}"
                                   f"'s ('{projector}'): pass the mmproj file published with this model")

    def shape(self, name: str) -> tuple[int, ...]:
        if name not in self.tensors:
            raise ModelFormatError(f"{self.path}: the mmproj file lacks the tensor '{name}'")
        return tuple(int(n) for n in reversed(self.tensors[name].shape))  # torch order

    def array(self, name: str) -> np.ndarray:
        """The tensor dequantized to float32, in torch order."""
        from gguf.quants import dequantize

        shape, tensor = self.shape(name), self.tensors[name]
        return np.array(dequantize(tensor.data, tensor.tensor_type), np.float32, copy=True).reshape(shape)

    @property
    def temporal_patch_size(self) -> int:
        """The patch embedding's temporal slices, one Conv2d weight each (v.patch_embd.weight, .weight.1, ...)."""
        return 1 + sum(1 for name in self.tensors if name.startswith("v.patch_embd.weight."))

    def vision_args(self, image_token_id: int, vision_start_token_id: int) -> VisionArgs:
        hidden = int(self.number("clip.vision.embedding_length"))
        depth = int(self.number("clip.vision.block_count"))
        patch = self.shape("v.patch_embd.weight")  # [hidden, C, P, P]
        deepstack = [bool(flag) for flag in self.get("clip.vision.is_deepstack_layers", None) or ()]
        return VisionArgs(
            depth=depth, hidden_size=hidden, intermediate_size=int(self.number("clip.vision.feed_forward_length")),
            num_heads=int(self.number("clip.vision.attention.head_count")),
            out_hidden_size=int(self.number("clip.vision.projection_dim")),
            num_position_embeddings=self.shape("v.position_embd.weight")[0], in_channels=patch[1],
            patch_size=int(self.number("clip.vision.patch_size")), temporal_patch_size=self.temporal_patch_size,
            spatial_merge_size=int(self.get("clip.vision.spatial_merge_size", 2)),
            hidden_act="silu" if self.get("clip.use_silu", False) else "gelu_pytorch_tanh",
            deepstack_visual_indexes=tuple(i for i, flag in enumerate(deepstack) if flag),
            image_token_id=image_token_id, vision_start_token_id=vision_start_token_id)

    def check_feeds(self, hidden_size: int, model_name: str) -> None:
        """ModelFormatError naming both files when the tower's output is not the language model's hidden size."""
        out = int(self.number("clip.vision.projection_dim"))
        if out != hidden_size:
            raise ModelFormatError(f"{self.path}: this vision tower feeds a language model of hidden size {out}, but "
                                   f"{model_name} has hidden size {hidden_size}: pass the mmproj file published "
                                   "with this model")

    @cached_property
    def processing(self) -> ImageProcessing:
        """The image processing of the tower's processor: its patch and merge sizes, mean and std, pixel limits."""
        mean = self.get("clip.vision.image_mean")
        std = self.get("clip.vision.image_std")
        return ImageProcessing(
            patch_size=int(self.number("clip.vision.patch_size")),
            temporal_patch_size=self.temporal_patch_size,
            merge_size=int(self.get("clip.vision.spatial_merge_size", 2)),
            min_pixels=int(self.get("clip.vision.image_min_pixels", PUBLISHED_MIN_PIXELS)),
            max_pixels=int(self.get("clip.vision.image_max_pixels", PUBLISHED_MAX_PIXELS)),
            image_mean=tuple(float(v) for v in mean) if mean else ImageProcessing.image_mean,
            image_std=tuple(float(v) for v in std) if std else ImageProcessing.image_std)
