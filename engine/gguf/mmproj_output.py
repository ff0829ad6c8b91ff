"""What both mmproj writers share (engine.gguf.mmproj_writer, mmproj_gemma4_writer): the type a tensor is stored in
and the file written through a temporary one."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from engine.gguf.convert import ConvertResult, encode, partial_writer
from engine.gguf.mmproj_file import ARCHITECTURE

ACTIVATIONS = ("gelu_pytorch_tanh", "silu")  # what clip.use_gelu / clip.use_silu say (llama.cpp's GELU is tanh's)


def write_mmproj_file(out_path: Path, write_keys: Callable[[object], None],
                      tensors: dict[str, tuple[np.ndarray, object]]) -> ConvertResult:
    """`write_keys(writer)` writes the clip.* keys; tensors: name -> (its data, its raw GGML type or None)."""
    with partial_writer(out_path, ARCHITECTURE) as writer:
        write_keys(writer)
        for name, (data, qtype) in tensors.items():
            writer.add_tensor(name, data, raw_dtype=qtype)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
    return ConvertResult(out_path, ARCHITECTURE, len(tensors), out_path.stat().st_size)


def stored(array: np.ndarray, out_type: str) -> tuple[np.ndarray, object]:
    """A matrix in the model's type: f32 as is, f16 for f16 and q8_0 (llama.cpp's default mmproj), else bf16."""
    from gguf import GGMLQuantizationType as Q

    if out_type == "f32":
        return array.astype(np.float32), None
    if out_type in ("f16", "q8_0"):
        return array.astype(np.float16), None
    return encode(array, Q.BF16), Q.BF16


def add_activation(writer, hidden_act: str) -> None:
    (writer.add_vision_use_silu if hidden_act == "silu" else writer.add_vision_use_gelu)(True)


def write_tower_keys(writer, name: str, args, image_size: int, mean, std, eps: float) -> None:
    """The `clip.*` keys every tower's mmproj file holds as llama.cpp's converter writes them: the file type, the
    tower's sizes (args: a Qwen or Gemma 4 tower's VisionArgs), its image size and normalization, the norm epsilon and
    activation. Each writer adds its projector type and its own keys."""
    import gguf

    writer.add_type(gguf.GGUFType.MMPROJ)
    writer.add_name(name)
    writer.add_clip_has_vision_encoder(True)
    writer.add_vision_projection_dim(args.out_hidden_size)
    writer.add_vision_image_size(image_size)
    writer.add_vision_patch_size(args.patch_size)
    writer.add_vision_embedding_length(args.hidden_size)
    writer.add_vision_feed_forward_length(args.intermediate_size)
    writer.add_vision_block_count(args.depth)
    writer.add_vision_head_count(args.num_heads)
    writer.add_vision_image_mean(list(mean))
    writer.add_vision_image_std(list(std))
    writer.add_vision_attention_layernorm_eps(eps)
    add_activation(writer, args.hidden_act)
