"""`wisp convert-gguf MODEL_DIR OUT.gguf --mmproj MMPROJ.gguf` for a gemma4 checkpoint: its vision tower as the
mmproj file llama.cpp's converter (`convert_hf_to_gguf.py --mmproj`, Gemma4VisionAudioModel) writes: architecture
`clip`, clip.vision.projector_type `gemma4v`, its clip.vision.* keys (image_size 224 as the converter's, unused;
mean 0 and std 1: the tower maps [0, 1] itself), the tensors under engine.gguf.mmproj_gemma4_names' names. Beyond the
converter's keys, those llama.cpp reads when present: the pooling (projector.scale_factor), the key/value heads and
the head width; the processor's soft-token budget as clip.vision.image_max_pixels (engine.gguf.mmproj_gemma4).
Matrices in the model's type (q8_0 models get an f16 tower), vectors, clip bounds and the position table f32."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from engine.errors import UnsupportedModelError
from engine.gguf.convert import ConvertResult
from engine.gguf.mmproj_file import GEMMA4_PROJECTOR
from engine.gguf.mmproj_gemma4 import PIXEL_RANGE, ROPE_THETA
from engine.gguf.mmproj_gemma4_names import POSITION_TABLE, PATCH_WEIGHT, gemma4_tensor_name, patch_weight_to_file
from engine.gguf.mmproj_output import ACTIVATIONS, stored, write_mmproj_file, write_tower_keys
from engine.vision.gemma4_args import Gemma4VisionArgs, gemma4_vision_args
from engine.vision.gemma4_load import PREFIXES
from engine.vision.gemma4_preprocess import Gemma4ImageProcessing
from engine.vision.gemma4_tower import Gemma4VisionTower
from engine.vision.tower_files import read_tensor, tower_shards

CONVERTER_IMAGE_SIZE = 224  # what llama.cpp's converter writes for Gemma 4 (no fixed size; clip.cpp requires the key)


def write_gemma4_mmproj(model_dir: Path, config: dict, out_path: Path, out_type: str) -> ConvertResult:
    """UnsupportedModelError for a tower llama.cpp's gemma4v graph computes otherwise, ModelFormatError for missing
    tower tensors."""
    args = gemma4_vision_args(config)
    check_writable(model_dir, args)
    processing = Gemma4ImageProcessing.from_folder(model_dir, args.patch_size, args.pooling_kernel_size)
    tensors = gemma4_mmproj_tensors(model_dir, args, out_type)
    return write_mmproj_file(out_path, lambda writer: write_keys(writer, args, processing, model_dir.name), tensors)


def check_writable(model_dir: Path, args: Gemma4VisionArgs) -> None:
    if args.rope_theta != ROPE_THETA:
        raise UnsupportedModelError(f"{model_dir}: llama.cpp's gemma4v tower turns its positions at rope base "
                                    f"{ROPE_THETA:g}, this checkpoint's at {args.rope_theta:g}")
    if args.hidden_act not in ACTIVATIONS:
        raise UnsupportedModelError(f"{model_dir}: the tower's hidden_activation '{args.hidden_act}' has no clip.use_* "
                                    "key")


def write_keys(writer, args: Gemma4VisionArgs, processing: Gemma4ImageProcessing, name: str) -> None:
    write_tower_keys(writer, name, args, CONVERTER_IMAGE_SIZE, PIXEL_RANGE[0], PIXEL_RANGE[1], args.rms_norm_eps)
    writer.add_clip_vision_projector_type(GEMMA4_PROJECTOR)
    writer.add_uint32("clip.vision.attention.head_count_kv", args.num_kv_heads)
    writer.add_uint32("clip.vision.attention.head_dim", args.head_dim)
    writer.add_vision_projector_scale_factor(args.pooling_kernel_size)
    writer.add_vision_max_pixels(processing.max_soft_tokens * (args.patch_size * args.pooling_kernel_size) ** 2)


def gemma4_mmproj_tensors(model_dir: Path, args: Gemma4VisionArgs,
                          out_type: str) -> dict[str, tuple[np.ndarray, object]]:
    """mmproj tensor name -> (its data, the raw GGML type where the data is encoded blocks, else None)."""
    shards = tower_shards(model_dir, PREFIXES)
    with torch.device("meta"):
        expected = Gemma4VisionTower(args).state_dict()
    out = {}
    for param, meta in expected.items():
        array = read_tensor(model_dir, shards, "model." + param, tuple(meta.shape)).float().numpy()
        if param == PATCH_WEIGHT:
            array = patch_weight_to_file(array, args.patch_size)
        keep_f32 = array.ndim <= 1 or param == POSITION_TABLE
        out[gemma4_tensor_name(param, args.depth)] = stored(array.reshape(array.shape or (1,)),
                                                            "f32" if keep_f32 else out_type)
    return out
