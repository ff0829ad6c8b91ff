"""The vision tower of a safetensors checkpoint (tensors under model.visual.*), on the device in the compute dtype."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from safetensors import safe_open

from engine.errors import ModelFormatError
from engine.vision.preprocess import ImageProcessing
from engine.vision.tower import VisionTower
from engine.vision.vision_args import vision_args
from engine.vision.vision_model import VisionModel

PREFIX = "model.visual."


def load_vision(folder: Path, device: torch.device, dtype: torch.dtype, vocab_size: int) -> VisionModel | None:
    """None for a checkpoint without a vision_config, without the tower's tensors (a text-only export) or whose
    image token is not in the language model's vocabulary."""
    config = json.loads((folder / "config.json").read_text())
    args = vision_args(config)
    if args is None or not 0 <= args.image_token_id < vocab_size:
        return None
    shards = tower_shards(folder)
    if PREFIX + "patch_embed.proj.weight" not in shards:
        return None
    with torch.device("meta"):
        tower = VisionTower(args)
    state = {name: read_tensor(folder, shards, PREFIX + name, tuple(param.shape)).to(dtype)
             for name, param in tower.named_parameters()}
    tower = tower.to_empty(device=device).to(dtype)  # the compute dtype, as the language model
    tower.load_state_dict(state)
    tower.inv_freq = VisionTower.rotary_frequencies(args).to(device)
    return VisionModel(tower.eval(), ImageProcessing.from_folder(folder, config["vision_config"]), device)


def tower_shards(folder: Path) -> dict[str, str]:
    """The tower's tensor names -> their safetensors file."""
    index = folder / "model.safetensors.index.json"
    if index.exists():
        weight_map = json.loads(index.read_text()).get("weight_map", {})
        return {name: shard for name, shard in weight_map.items() if name.startswith(PREFIX)}
    found = {}
    for shard in sorted(folder.glob("*.safetensors")):
        with safe_open(str(shard), framework="pt") as handle:
            found.update({name: shard.name for name in handle.keys() if name.startswith(PREFIX)})
    return found


def read_tensor(folder: Path, shards: dict[str, str], name: str, shape: tuple[int, ...]) -> torch.Tensor:
    if name not in shards:
        raise ModelFormatError(f"{folder}: the vision tower's tensor '{name}' is missing from the checkpoint")
    with safe_open(str(folder / shards[name]), framework="pt") as handle:
        tensor = handle.get_tensor(name)
    if tuple(tensor.shape) != shape:
        raise ModelFormatError(f"{folder / shards[name]}: '{name}' has shape {list(tensor.shape)}, the vision "
                               f"config implies {list(shape)}")
    return tensor


def tower_bytes(config: dict, dtype_bytes: int) -> int:
    """The tower's weights on the device, for the memory plan."""
    args = vision_args(config)
    if args is None:
        return 0
    with torch.device("meta"):
        tower = VisionTower(args)
    return sum(p.numel() for p in tower.parameters()) * dtype_bytes
