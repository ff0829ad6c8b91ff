"""The tensor names and layouts of Gemma 4's tower in an mmproj file (llama.cpp's `clip` architecture, projector
`gemma4v`), for each parameter and buffer of engine.vision.gemma4_tower, as llama.cpp's converter writes them: the
checkpoint's names (model.vision_tower.*, model.embed_vision.*) through the gguf package's tensor map once the
converter's renames are made (model.vision_tower.encoder. -> vision_model.model., the ClippableLinear's .linear
dropped), so that q_proj.linear.weight -> v.blk.N.attn_q.weight, its clip bounds q_proj.input_min ->
v.blk.N.attn_q.input_min, the norms ln1 / attn_post_norm / ln2 / ffn_post_norm, the projector mm.input_projection;
the patch embedding as a Conv2d weight [hidden, 3, P, P] (the checkpoint's linear reads patches flattened as (row,
column, channel))."""

from __future__ import annotations

import numpy as np

from engine.errors import ModelFormatError

PATCH_WEIGHT = "vision_tower.patch_embedder.input_proj.weight"  # [hidden, P * P * 3]; the file's is [hidden, 3, P, P]
POSITION_TABLE = "vision_tower.patch_embedder.position_embedding_table"  # [2, positions, hidden]: x rows, y rows
CLIP_BOUNDS = (".input_min", ".input_max", ".output_min", ".output_max")  # a ClippableLinear's scalars
TENSOR_SUFFIXES = (".weight", ".bias", *CLIP_BOUNDS)


def gemma4_tensor_name(param: str, depth: int) -> str:
    """The mmproj tensor of a tower parameter or buffer (as Gemma4VisionTower.state_dict names it)."""
    name = ("model." + param).replace("model.vision_tower.encoder.", "vision_model.model.")
    name = name.replace(".linear.weight", ".weight")
    if name.endswith("position_embedding_table"):
        name += ".weight"
    mapped = tensor_map(depth).get_name(name, try_suffixes=TENSOR_SUFFIXES)
    if mapped is None:
        raise ModelFormatError(f"Gemma 4's vision tower parameter '{param}' has no mmproj tensor name")
    return mapped


def patch_weight_to_file(weight: np.ndarray, patch_size: int) -> np.ndarray:
    """[hidden, P * P * 3] (a patch flattened as row, column, channel) -> the Conv2d weight [hidden, 3, P, P]."""
    return np.ascontiguousarray(weight.reshape(weight.shape[0], patch_size, patch_size, 3).transpose(0, 3, 1, 2))


def patch_weight_from_file(weight: np.ndarray) -> np.ndarray:
    """The Conv2d weight [hidden, 3, P, P] -> the checkpoint's linear [hidden, P * P * 3]."""
    return np.ascontiguousarray(weight.transpose(0, 2, 3, 1).reshape(weight.shape[0], -1))


def tensor_map(depth: int):
    import gguf

    return gguf.get_tensor_name_map(gguf.MODEL_ARCH.MMPROJ, depth)
