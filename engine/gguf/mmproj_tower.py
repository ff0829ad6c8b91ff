"""The vision tower of an mmproj file beside a GGUF model (engine.gguf.mmproj_file), on the device in the compute
dtype: the same engine.vision tower and image processing as a safetensors checkpoint's, its weights dequantized
from the file's types. Gemma 4's (projector gemma4v): engine.gguf.mmproj_gemma4_tower."""

from __future__ import annotations

from pathlib import Path

import torch

from engine.errors import ModelFormatError
from engine.gguf.mmproj_file import GEMMA4_PROJECTOR, IMAGE_TOKEN, VISION_START_TOKEN, MmprojFile
from engine.gguf.mmproj_gemma4_tower import load_gemma4_mmproj
from engine.gguf.mmproj_names import PATCH_WEIGHT, mmproj_tensor_name, patch_weight_names
from engine.vision.tower import VisionTower
from engine.vision.vision_args import VisionArgs
from engine.vision.vision_model import VisionModel


def mmproj_vision_args(mmproj: MmprojFile, model_path: Path, hidden_size: int, token_to_id) -> VisionArgs:
    """The tower's arguments, checked against the language model it pairs with (its hidden size, its image
    tokens); ModelFormatError naming both files otherwise."""
    tokens = {text: token_to_id(text) for text in (IMAGE_TOKEN, VISION_START_TOKEN)}
    missing = [text for text, token in tokens.items() if token is None]
    if missing:
        raise ModelFormatError(f"{mmproj.path}: the model {model_path.name} has no {' or '.join(missing)} token in "
                               "its vocabulary, so it cannot take this vision tower's images")
    mmproj.check_feeds(hidden_size, model_path.name)
    return mmproj.vision_args(tokens[IMAGE_TOKEN], tokens[VISION_START_TOKEN])


def load_mmproj_vision(path: Path, model_path: Path, hidden_size: int, token_to_id, device: torch.device,
                       dtype: torch.dtype) -> VisionModel:
    mmproj = MmprojFile(path)
    if mmproj.projector == GEMMA4_PROJECTOR:
        return load_gemma4_mmproj(mmproj, model_path, hidden_size, token_to_id, device, dtype)
    args = mmproj_vision_args(mmproj, model_path, hidden_size, token_to_id)
    with torch.device("meta"):
        tower = VisionTower(args)
    state = {name: read_param(mmproj, name, tuple(param.shape), args).to(dtype)
             for name, param in tower.named_parameters()}
    tower = tower.to_empty(device=device).to(dtype)
    tower.load_state_dict(state)
    tower.inv_freq = VisionTower.rotary_frequencies(args).to(device)
    return VisionModel(tower.eval(), mmproj.processing, device)


def read_param(mmproj: MmprojFile, param: str, shape: tuple[int, ...], args: VisionArgs) -> torch.Tensor:
    if param == PATCH_WEIGHT:  # [hidden, C, temporal, P, P] from one [hidden, C, P, P] tensor per temporal slice
        slices = [torch.from_numpy(mmproj.array(name)) for name in patch_weight_names(args)]
        tensor = torch.stack(slices, dim=2)
    else:
        tensor = torch.from_numpy(mmproj.array(mmproj_tensor_name(param, args)))
    if tuple(tensor.shape) != shape:
        raise ModelFormatError(f"{mmproj.path}: the tower's '{param}' has shape {list(tensor.shape)}, the file's "
                               f"clip.vision keys imply {list(shape)}")
    return tensor
