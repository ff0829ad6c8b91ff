"""Gemma 4's vision tower as its config.json's vision_config describes it (transformers' Gemma4VisionConfig), with the
language model's hidden size its embedder projects into."""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import ModelFormatError


@dataclass(frozen=True)
class Gemma4VisionArgs:
    depth: int
    hidden_size: int
    intermediate_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    out_hidden_size: int  # the language model's hidden size (embed_vision's projection)
    patch_size: int = 16
    pooling_kernel_size: int = 3  # k x k patches average into one soft token
    position_embedding_size: int = 10240  # rows of each axis' learned position table
    hidden_act: str = "gelu_pytorch_tanh"
    rms_norm_eps: float = 1e-6
    rope_theta: float = 100.0
    use_clipped_linears: bool = False  # each linear clamps its input and output to stored bounds
    standardize: bool = False  # the pooled features are shifted and scaled by stored std_bias / std_scale
    image_token_id: int = 0

    @property
    def patch_dim(self) -> int:
        return 3 * self.patch_size**2


# transformers' Gemma4VisionConfig / Gemma4Config defaults: what it reads for a key config.json leaves out
DEFAULTS = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 16, "num_attention_heads": 12,
            "head_dim": 64, "patch_size": 16, "pooling_kernel_size": 3, "position_embedding_size": 10240,
            "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6}
TOKEN_DEFAULTS = {"image_token_id": 258880, "boi_token_id": 255999, "eoi_token_id": 258882}


def gemma4_vision_args(config: dict) -> Gemma4VisionArgs | None:
    """None for a checkpoint without a vision_config; keys it leaves out take transformers' defaults;
    ModelFormatError for a value that is not a number."""
    vision = config.get("vision_config")
    if not isinstance(vision, dict):
        return None
    v = {**DEFAULTS, **{k: value for k, value in vision.items() if value is not None}}
    text = config.get("text_config") or config
    try:
        rope = v.get("rope_parameters") or {}
        return Gemma4VisionArgs(
            depth=int(v["num_hidden_layers"]), hidden_size=int(v["hidden_size"]),
            intermediate_size=int(v["intermediate_size"]), num_heads=int(v["num_attention_heads"]),
            num_kv_heads=int(v.get("num_key_value_heads", v["num_attention_heads"])), head_dim=int(v["head_dim"]),
            out_hidden_size=int(text["hidden_size"]), patch_size=int(v["patch_size"]),
            pooling_kernel_size=int(v["pooling_kernel_size"]),
            position_embedding_size=int(v["position_embedding_size"]),
            hidden_act=v["hidden_activation"], rms_norm_eps=float(v["rms_norm_eps"]),
            rope_theta=float(rope.get("rope_theta", 100.0)), use_clipped_linears=bool(v.get("use_clipped_linears")),
            standardize=bool(v.get("standardize")), image_token_id=token_id(config, "image_token_id"))
    except (KeyError, TypeError, ValueError) as err:
        raise ModelFormatError(f"config.json: Gemma 4's vision_config lacks or mangles {err}") from None


def token_id(config: dict, name: str) -> int:
    """One of the image tokens (image, begin, end), as config.json has it or transformers' default."""
    return int(config.get(name) if config.get(name) is not None else TOKEN_DEFAULTS[name])


def gemma4_num_params(args: Gemma4VisionArgs) -> int:
    """The tower's and its projector's weights (engine.vision.gemma4_tower)."""
    h, inner, hd = args.hidden_size, args.intermediate_size, args.head_dim
    attention = h * hd * (2 * args.num_heads + 2 * args.num_kv_heads) + 2 * hd
    layer = attention + 3 * h * inner + 4 * h
    return h * args.patch_dim + 2 * args.position_embedding_size * h + args.depth * layer + h * args.out_hidden_size


def gemma4_vision_sizes(config: dict, vocab_size: int, max_patches: int = 1120 * 9) -> dict:
    """What the memory plan counts for Gemma 4's tower (as engine.vision.vision_args.vision_sizes): its weights and
    the activations of one image of the largest patch budget, in elements. Nothing when the image token is outside
    the vocabulary (no tower is loaded then)."""
    args = gemma4_vision_args(config)
    if args is None or not 0 <= args.image_token_id < vocab_size:
        return {}
    return {"vision_params": gemma4_num_params(args), "vision_workspace": gemma4_workspace_elements(args, max_patches)}


def gemma4_workspace_elements(args: Gemma4VisionArgs, max_patches: int) -> int:
    """The tower's activations for one image of max_patches patches, in elements."""
    return max_patches * (6 * args.hidden_size + 2 * args.intermediate_size + args.patch_dim)
