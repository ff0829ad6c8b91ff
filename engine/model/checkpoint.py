"""Lazy, memory-mapped access to a folder of safetensors files (single file or sharded with an index)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import safe_open

from engine.errors import ModelFormatError

INDEX_FILE = "model.safetensors.index.json"
LANGUAGE_MODEL = "model.language_model."  # a vision-language checkpoint's language model (qwen3_5_moe)


class Checkpoint:
    """Maps tensor names to shards; opens each shard once, memory-mapped; reads one tensor at a time."""

    def __init__(self, folder: Path):
        self.folder = folder
        self._handles: dict[str, object] = {}
        self.weight_map = self._weight_map()
        # The language model of a vision-language checkpoint is read under the names of a text-only one.
        self.stored_names = {"model." + name[len(LANGUAGE_MODEL):]: name for name in self.weight_map
                             if name.startswith(LANGUAGE_MODEL)}
        self.weight_map.update({alias: self.weight_map[name] for alias, name in self.stored_names.items()})

    def _weight_map(self) -> dict[str, str]:
        index = self.folder / INDEX_FILE
        if index.exists():
            return self._read_index(index)
        shards = sorted(p.name for p in self.folder.glob("*.safetensors"))
        if not shards:
            raise ModelFormatError(f"{self.folder}: no *.safetensors weights found (PyTorch .bin checkpoints are not supported)")
        return {name: shard for shard in shards for name in self._open(shard).keys()}

    def _read_index(self, index: Path) -> dict[str, str]:
        try:
            weight_map = json.loads(index.read_text())["weight_map"]
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ModelFormatError(f"{index}: not a valid safetensors index ({err})") from None
        for shard in sorted(set(weight_map.values())):
            if not (self.folder / shard).exists():
                raise ModelFormatError(f"{self.folder / shard}: shard listed in {INDEX_FILE} is missing")
        return weight_map

    def _open(self, shard: str):
        if shard not in self._handles:
            path = self.folder / shard
            try:
                self._handles[shard] = safe_open(str(path), framework="pt")
            except Exception as err:  # safetensors raises its own error types for truncation and bad headers
                raise ModelFormatError(f"{path}: truncated or corrupt safetensors file ({err})") from None
        return self._handles[shard]

    def has(self, name: str) -> bool:
        return name in self.weight_map

    def get(self, name: str, shape: tuple[int, ...] | None = None) -> torch.Tensor:
        if name not in self.weight_map:
            raise ModelFormatError(f"{self.folder}: tensor '{name}' is missing from the checkpoint")
        shard = self.weight_map[name]
        try:
            tensor = self._open(shard).get_tensor(self.stored_names.get(name, name))
        except Exception as err:
            raise ModelFormatError(f"{self.folder / shard}: cannot read tensor '{name}' ({err})") from None
        if shape is not None and tuple(tensor.shape) != tuple(shape):
            raise ModelFormatError(
                f"{self.folder / shard}: tensor '{name}' has shape {list(tensor.shape)}, config.json implies {list(shape)}"
            )
        return tensor

    def shape(self, name: str) -> tuple[int, ...]:
        """A tensor's shape, from its file's header (nothing read)."""
        return tuple(self._open(self.weight_map[name]).get_slice(self.stored_names.get(name, name)).get_shape())

    def get_row(self, name: str, index: int) -> torch.Tensor:
        """tensor[index] of a stacked tensor (one expert of a fused [E, ...] tensor), reading only its bytes."""
        shard = self.weight_map[name]
        try:
            return self._open(shard).get_slice(self.stored_names.get(name, name))[index]
        except Exception as err:
            raise ModelFormatError(f"{self.folder / shard}: cannot read row {index} of '{name}' ({err})") from None


def is_stacked_transposed(ckpt: Checkpoint, gate_up: str, hidden: int, intermediate: int) -> bool:
    """Stacked experts as Qwen3-VL-MoE's published checkpoints store them, gate_up_proj [E, D, 2I] and down_proj
    [E, I, D] (transformers transposes them when it loads), rather than [E, 2I, D] and [E, D, I]."""
    return hidden != 2 * intermediate and ckpt.shape(gate_up)[1:] == (hidden, 2 * intermediate)
