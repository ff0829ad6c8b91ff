"""Gemma 4's vision tower in an mmproj file (projector `gemma4v`): its arguments, image processing and size from the
clip.vision.* keys and the tensor shapes, as llama.cpp reads them. llama.cpp fixes the tower's rotary base at 100 and
takes the pooling from clip.vision.projector.scale_factor (3 without it); the heads' width and the key/value heads
come from the tensors; clipped linears and the standardisation from whether their tensors are there. The soft-token
budget is clip.vision.image_max_pixels over the pixels of one token ((patch x pooling)^2, llama.cpp's rule), else
the published processor's 280. Torch-free (the planner counts the tower from here); engine.gguf.mmproj_gemma4_tower
loads it."""

from __future__ import annotations

import numpy as np

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.vision.gemma4_args import Gemma4VisionArgs, gemma4_num_params, gemma4_workspace_elements
from engine.vision.gemma4_preprocess import SOFT_TOKEN_BUDGETS, Gemma4ImageProcessing

IMAGE_TOKEN, BOI_TOKEN, EOI_TOKEN = "<|image|>", "<|image>", "<image|>"  # Gemma 4's tokenizer, found by their text
ROPE_THETA = 100.0  # llama.cpp's gemma4v rotary base (no key holds it)
DEFAULT_POOLING = 3  # llama.cpp's gemma4v pooling without clip.vision.projector.scale_factor
PUBLISHED_MAX_SOFT_TOKENS = 280  # the published processor's budget, and llama.cpp's
PIXEL_RANGE = ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0))  # the mean and std that leave pixels in [0, 1], as the tower takes


def gemma4_mmproj_args(mmproj, image_token_id: int) -> Gemma4VisionArgs:
    """ModelFormatError naming the file for a missing key or tensor."""
    check_pixel_range(mmproj)
    head_dim = mmproj.shape("v.blk.0.attn_q_norm.weight")[0]
    return Gemma4VisionArgs(
        depth=int(mmproj.number("clip.vision.block_count")),
        hidden_size=int(mmproj.number("clip.vision.embedding_length")),
        intermediate_size=int(mmproj.number("clip.vision.feed_forward_length")),
        num_heads=int(mmproj.number("clip.vision.attention.head_count")),
        num_kv_heads=mmproj.shape("v.blk.0.attn_k.weight")[0] // head_dim, head_dim=head_dim,
        out_hidden_size=int(mmproj.number("clip.vision.projection_dim")),
        patch_size=int(mmproj.number("clip.vision.patch_size")), pooling_kernel_size=pooling(mmproj),
        position_embedding_size=mmproj.shape("v.position_embd.weight")[1],
        hidden_act="silu" if mmproj.get("clip.use_silu", False) else "gelu_pytorch_tanh",
        rms_norm_eps=f32_decimal(mmproj.get("clip.vision.attention.layer_norm_epsilon", 1e-6)), rope_theta=ROPE_THETA,
        use_clipped_linears="v.blk.0.attn_q.input_min" in mmproj.tensors, standardize="v.std_bias" in mmproj.tensors,
        image_token_id=image_token_id)


def f32_decimal(value: float) -> float:
    """An f32 key's value as the shortest decimal that rounds to it (1e-6, as config.json has it, not 9.99...e-7)."""
    return float(str(np.float32(value)))


def pooling(mmproj) -> int:
    return int(mmproj.get("clip.vision.projector.scale_factor", DEFAULT_POOLING))


def gemma4_mmproj_processing(mmproj) -> Gemma4ImageProcessing:
    patch, k = int(mmproj.number("clip.vision.patch_size")), pooling(mmproj)
    max_pixels = mmproj.get("clip.vision.image_max_pixels")
    budget = PUBLISHED_MAX_SOFT_TOKENS if max_pixels is None else int(max_pixels) // (patch * k) ** 2
    if budget not in SOFT_TOKEN_BUDGETS:
        raise ModelFormatError(f"{mmproj.path}: clip.vision.image_max_pixels {max_pixels} is {budget} image tokens, "
                               f"not one of Gemma 4's budgets {SOFT_TOKEN_BUDGETS}")
    return Gemma4ImageProcessing(patch, k, budget)


def check_pixel_range(mmproj) -> None:
    """UnsupportedModelError naming the file for an image mean/std other than 0/1: Gemma 4's tower maps [0, 1] to
    [-1, 1] itself."""
    mean, std = (tuple(float(v) for v in mmproj.get(f"clip.vision.image_{key}", values))
                 for key, values in zip(("mean", "std"), PIXEL_RANGE))
    if (mean, std) != PIXEL_RANGE:
        raise UnsupportedModelError(f"{mmproj.path}: Gemma 4's tower takes pixels in [0, 1] (image mean 0, std 1), "
                                    f"not mean {list(mean)} and std {list(std)}")


def gemma4_mmproj_elements(mmproj) -> int:
    """The tower's weights and one largest image's activations, in elements (as engine.vision.gemma4_args')."""
    args = gemma4_mmproj_args(mmproj, image_token_id=0)
    processing = gemma4_mmproj_processing(mmproj)
    max_patches = processing.max_soft_tokens * processing.pooling_kernel_size**2
    return gemma4_num_params(args) + gemma4_workspace_elements(args, max_patches)
