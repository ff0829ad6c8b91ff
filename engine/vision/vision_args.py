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
    # blocks whose output also goes, through a merger of its own, to the language model's first layers (Qwen3-VL)
    deepstack_visual_indexes: tuple[int, ...] = ()
    image_token_id: int = 0  # the language model's placeholder token that an image's embeddings replace
    vision_start_token_id: int = 0

    @property
    def patch_dim(self) -> int:
        """Values of one flattened patch: channels x temporal patch x patch x patch."""
        return self.in_channels * self.temporal_patch_size * self.patch_size**2

    @property
    def merge_unit(self) -> int:
        return self.spatial_merge_size**2

    @property
    def num_params(self) -> int:
        """The tower's weights: patch embed, position grid, blocks, merger (engine.vision.tower)."""
        h, inner, merged = self.hidden_size, self.intermediate_size, self.hidden_size * self.merge_unit
        block = 4 * h + (3 * h * h + 3 * h) + (h * h + h) + (h * inner + inner) + (inner * h + h)
        merger = (merged * merged + merged) + (merged * self.out_hidden_size + self.out_hidden_size)
        deepstack = len(self.deepstack_visual_indexes) * (2 * merged + merger)
        return h * self.patch_dim + h + self.num_position_embeddings * h + self.depth * block + 2 * h + merger \
            + deepstack

    def workspace_elements(self, max_pixels: int) -> int:
        """Activations of one image of max_pixels while the tower runs: a block's hidden states, q/k/v and MLP
        intermediate for every patch, and the merged output (attention runs fused, without the score matrix)."""
        patches = max_pixels // self.patch_size**2
        return patches * (6 * self.hidden_size + self.intermediate_size + self.patch_dim) \
            + patches // self.merge_unit * 2 * self.hidden_size * self.merge_unit


TOWER_MODEL_TYPES = ("qwen3_5_moe", "qwen3_vl_moe")  # the checkpoints whose tower engine.vision.tower is


def vision_args(config: dict) -> VisionArgs | None:
    """None for a checkpoint without a vision tower Wisp runs (no vision_config, or another architecture's tower, as
    Gemma 4's); ModelFormatError for one Wisp cannot read."""
    vision = config.get("vision_config")
    if not isinstance(vision, dict) or config.get("model_type") not in TOWER_MODEL_TYPES:
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
            deepstack_visual_indexes=tuple(int(i) for i in vision.get("deepstack_visual_indexes") or ()),
            image_token_id=int(config["image_token_id"]), vision_start_token_id=int(config["vision_start_token_id"]))
    except (KeyError, TypeError, ValueError) as err:
        raise ModelFormatError(f"config.json: vision_config lacks or mangles {err}") from None


PUBLISHED_MAX_PIXELS = 16777216  # Qwen3-VL's and Qwen3.5's preprocessor_config.json: the largest image's pixels


def vision_sizes(config: dict, vocab_size: int) -> dict:
    """What the memory plan counts for a tower beside the language model (ModelArgs.extra; engine.model.sizes):
    its weights and the activations of one largest image, in elements of the compute dtype. Nothing when the
    image token is outside the vocabulary (engine.vision.load_tower loads no tower then)."""
    args = vision_args(config)
    if args is None or not 0 <= args.image_token_id < vocab_size:
        return {}
    return {"vision_params": args.num_params, "vision_workspace": args.workspace_elements(PUBLISHED_MAX_PIXELS)}
