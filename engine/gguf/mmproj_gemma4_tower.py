"""Gemma 4's vision tower from an mmproj file (projector `gemma4v`) beside a gemma4 GGUF model, on the device in the
compute dtype: the same engine.vision Gemma 4 tower as a checkpoint's, its weights dequantized from the file's types.
Its image tokens attend to each other both ways in the sliding layers, as the published checkpoints say and as
llama.cpp decodes gemma4v images (non-causal)."""

from __future__ import annotations

from pathlib import Path

import torch

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.gguf.mmproj_file import MmprojFile
from engine.gguf.mmproj_gemma4 import BOI_TOKEN, EOI_TOKEN, IMAGE_TOKEN, gemma4_mmproj_args, gemma4_mmproj_processing
from engine.gguf.mmproj_gemma4_names import PATCH_WEIGHT, gemma4_tensor_name, patch_weight_from_file
from engine.vision.gemma4_args import Gemma4VisionArgs
from engine.vision.gemma4_tower import Gemma4VisionTower
from engine.vision.gemma4_vision_model import Gemma4VisionModel

VISION_PREFIXES = ("v.", "mm.input_projection")  # the vision encoder's and its projector's tensors


def load_gemma4_mmproj(mmproj: MmprojFile, model_path: Path, hidden_size: int, token_to_id, device: torch.device,
                       dtype: torch.dtype) -> Gemma4VisionModel:
    """ModelFormatError naming both files for a model without Gemma 4's image tokens or of another hidden size."""
    tokens = {text: token_to_id(text) for text in (IMAGE_TOKEN, BOI_TOKEN, EOI_TOKEN)}
    missing = [text for text, token in tokens.items() if token is None]
    if missing:
        raise ModelFormatError(f"{mmproj.path}: the model {model_path.name} has no {' or '.join(missing)} token in "
                               "its vocabulary, so it cannot take this vision tower's images")
    mmproj.check_feeds(hidden_size, model_path.name)
    args = gemma4_mmproj_args(mmproj, tokens[IMAGE_TOKEN])
    with torch.device("meta"):
        tower = Gemma4VisionTower(args)
    check_no_other_tensors(mmproj, {gemma4_tensor_name(name, args.depth) for name in tower.state_dict()})
    state = {name: read_tensor(mmproj, name, tuple(value.shape), args).to(dtype)
             for name, value in tower.state_dict().items()}
    tower = tower.to_empty(device=device).to(dtype)
    tower.load_state_dict(state)
    tower.inv_freq = Gemma4VisionTower.rotary_frequencies(args).to(device)
    return Gemma4VisionModel(tower.eval(), gemma4_mmproj_processing(mmproj), device, tokens[BOI_TOKEN],
                             tokens[EOI_TOKEN], is_bidirectional=True)


def read_tensor(mmproj: MmprojFile, param: str, shape: tuple[int, ...], args: Gemma4VisionArgs) -> torch.Tensor:
    array = mmproj.array(gemma4_tensor_name(param, args.depth))
    if param == PATCH_WEIGHT:
        array = patch_weight_from_file(array)
    elif not shape and array.size == 1:  # a clip bound: a scalar stored as one element
        array = array.reshape(())
    if tuple(array.shape) != shape:
        raise ModelFormatError(f"{mmproj.path}: Gemma 4's tower '{param}' has shape {list(array.shape)}, the file's "
                               f"clip.vision keys imply {list(shape)}")
    return torch.from_numpy(array)


def check_no_other_tensors(mmproj: MmprojFile, expected: set[str]) -> None:
    """UnsupportedModelError naming the file for vision tensors Wisp's tower has no place for (a feature it does not
    compute); an audio encoder's (a.*, mm.a.*) are left unread."""
    others = sorted(name for name in mmproj.tensors if name.startswith(VISION_PREFIXES) and name not in expected)
    if others:
        raise UnsupportedModelError(f"{mmproj.path}: Gemma 4's vision tower here has tensors Wisp does not compute "
                                    f"({', '.join(others[:3])}{', ...' if len(others) > 3 else ''})")
