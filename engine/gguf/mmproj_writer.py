"""`wisp convert-gguf MODEL_DIR OUT.gguf --mmproj MMPROJ.gguf`: a vision-language checkpoint's tower as the
mmproj file llama.cpp's converter (`convert_hf_to_gguf.py --mmproj`) writes: architecture `clip`, projector
`qwen3vl_merger`, the clip.vision.* keys, the tensors under engine.gguf.mmproj_names' names. Matrices in the
model's type (q8_0 models get an f16 tower, as llama.cpp's default mmproj), norms, biases and the position grid f32.
The image processor's pixel limits go in clip.vision.image_{min,max}_pixels. Gemma 4's tower:
engine.gguf.mmproj_gemma4_writer."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from safetensors import safe_open

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.gguf.convert import ConvertResult, import_gguf
from engine.gguf.mmproj_file import QWEN_PROJECTOR
from engine.gguf.mmproj_gemma4_writer import write_gemma4_mmproj
from engine.gguf.mmproj_names import PATCH_WEIGHT, mmproj_tensor_name, patch_weight_names
from engine.gguf.mmproj_output import ACTIVATIONS, stored, write_mmproj_file, write_tower_keys
from engine.vision.load_tower import GEMMA4_VISION
from engine.vision.tower_files import PREFIX, tower_shards
from engine.vision.preprocess import ImageProcessing
from engine.vision.tower import VisionTower
from engine.vision.vision_args import VisionArgs, vision_args

LAYER_NORM_EPS = 1e-6  # engine.vision.tower's LayerNorms


def write_mmproj(model_dir: Path, out_path: Path, out_type: str) -> ConvertResult:
    """Write `out_path` (through a temporary file); UnsupportedModelError for a checkpoint without a tower Wisp
    runs, ModelFormatError for one whose tower tensors are missing."""
    import_gguf()  # the missing-package error before any work
    config = json.loads((model_dir / "config.json").read_text())
    if (config.get("vision_config") or {}).get("model_type") == GEMMA4_VISION:
        return write_gemma4_mmproj(model_dir, config, out_path, out_type)
    args = vision_args(config)
    if args is None:
        raise UnsupportedModelError(f"{model_dir}: no vision tower to write an mmproj file of (Wisp writes the "
                                    "towers of qwen3_5_moe, qwen3_vl_moe and gemma4 checkpoints)")
    if args.hidden_act not in ACTIVATIONS:
        raise UnsupportedModelError(f"{model_dir}: the tower's hidden_act '{args.hidden_act}' has no clip.use_* key")
    tensors = mmproj_tensors(model_dir, args, out_type)
    processing = ImageProcessing.from_folder(model_dir, config["vision_config"])
    return write_mmproj_file(out_path, lambda writer: write_keys(writer, args, processing, model_dir.name), tensors)


def write_keys(writer, args: VisionArgs, processing: ImageProcessing, name: str) -> None:
    write_tower_keys(writer, name, args, int(args.num_position_embeddings**0.5) * args.patch_size,
                     processing.image_mean, processing.image_std, LAYER_NORM_EPS)
    writer.add_clip_projector_type(QWEN_PROJECTOR)
    writer.add_vision_min_pixels(processing.min_pixels)
    writer.add_vision_max_pixels(processing.max_pixels)
    writer.add_vision_spatial_merge_size(args.spatial_merge_size)
    if args.deepstack_visual_indexes:
        writer.add_vision_is_deepstack_layers([i in args.deepstack_visual_indexes for i in range(args.depth)])


def mmproj_tensors(model_dir: Path, args: VisionArgs, out_type: str) -> dict[str, tuple[np.ndarray, object]]:
    """mmproj tensor name -> (its data, the raw GGML type where the data is encoded blocks, else None)."""
    shards = tower_shards(model_dir)
    with torch.device("meta"):
        params = dict(VisionTower(args).named_parameters())
    out = {}
    for param, meta in params.items():
        if PREFIX + param not in shards:
            raise ModelFormatError(f"{model_dir}: the vision tower's tensor '{PREFIX + param}' is missing")
        with safe_open(str(model_dir / shards[PREFIX + param]), framework="pt") as handle:
            tensor = handle.get_tensor(PREFIX + param).float()
        if tuple(tensor.shape) != tuple(meta.shape):
            raise ModelFormatError(f"{model_dir}: '{PREFIX + param}' has shape {list(tensor.shape)}, the vision "
                                   f"config implies {list(meta.shape)}")
        if param == PATCH_WEIGHT:
            pieces = dict(zip(patch_weight_names(args), tensor.unbind(2)))
        else:
            pieces = {mmproj_tensor_name(param, args): tensor}
        for name, piece in pieces.items():
            keep_f32 = piece.ndim == 1 or param == "pos_embed.weight"
            out[name] = stored(piece.contiguous().numpy(), "f32" if keep_f32 else out_type)
    return out

