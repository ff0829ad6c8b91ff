"""A checkpoint's vision tower as its config.json's vision_config describes it (Qwen3.5 / Qwen3-VL towers)."""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import ModelFormatError


@dataclass(frozen=True)
class VisionArgs:
    depth: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    out_hidden_size: int
    num_position_embeddings: int
    in_channels: int = 3
    patch_size: int = 16
    temporal_patch_size: int = 2
    spatial_merge_size: int = 2
    hidden_act: str = "gelu_pytorch_tanh"
    rope_theta: float = 10000.0
    image_token_id: int = 0  # the language model's placeholder token that an image's embeddings replace
    vision_start_token_id: int = 0

    @property
    def patch_dim(self) -> int:
        """Values of one flattened patch: channels x temporal patch x patch x patch."""
        return self.in_channels * self.temporal_patch_size * self.patch_size**2

    @property
    def merge_unit(self) -> int:
        return self.spatial_merge_size**2


def vision_args(config: dict) -> VisionArgs | None:
    """None for a checkpoint without a vision_config; ModelFormatError for one Wisp cannot read."""
    vision = config.get("vision_config")
    if not isinstance(vision, dict):
        return None
    try:
        rope = vision.get("rope_parameters") or {}
        return VisionArgs(
            depth=int(vision["depth"]), hidden_size=int(vision["hidden_size"]),
            intermediate_size=int(vision["intermediate_size"]), num_heads=int(vision["num_heads"]),
            out_hidden_size=int(vision["out_hidden_size"]),
            num_position_embeddings=int(vision.get("num_position_embeddings", 2304)),
            in_channels=int(vision.get("in_channels", 3)), patch_size=int(vision.get("patch_size", 16)),
            temporal_patch_size=int(vision.get("temporal_patch_size", 2)),
            spatial_merge_size=int(vision.get("spatial_merge_size", 2)),
            hidden_act=vision.get("hidden_act", "gelu_pytorch_tanh"),
            rope_theta=float(rope.get("rope_theta", 10000.0)),
            image_token_id=int(config["image_token_id"]), vision_start_token_id=int(config["vision_start_token_id"]))
    except (KeyError, TypeError, ValueError) as err:
        raise ModelFormatError(f"config.json: vision_config lacks or mangles {err}") from None
