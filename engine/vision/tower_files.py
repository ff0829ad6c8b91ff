"""A checkpoint's vision tower tensors in its safetensors files: where each is, and one read with its shape checked."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open

from engine.errors import ModelFormatError

PREFIX = "model.visual."  # the Qwen3-VL / Qwen3.5 tower's tensors


def tower_shards(folder: Path, prefixes: tuple[str, ...] = (PREFIX,)) -> dict[str, str]:
    """The tower's tensor names (those under prefixes) -> their safetensors file."""
    index = folder / "model.safetensors.index.json"
    if index.exists():
        weight_map = json.loads(index.read_text()).get("weight_map", {})
        return {name: shard for name, shard in weight_map.items() if name.startswith(prefixes)}
    found = {}
    for shard in sorted(folder.glob("*.safetensors")):
        with safe_open(str(shard), framework="pt") as handle:
            found.update({name: shard.name for name in handle.keys() if name.startswith(prefixes)})
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
