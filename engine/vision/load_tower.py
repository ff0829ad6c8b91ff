"""The vision tower of a safetensors checkpoint (tensors under model.visual.*), on the device in the compute dtype."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from engine.vision.gemma4_load import load_gemma4_vision
from engine.vision.preprocess import ImageProcessing
from engine.vision.tower import VisionTower
from engine.vision.vision_args import vision_args
from engine.vision.tower_files import PREFIX, read_tensor, tower_shards
from engine.vision.vision_model import VisionModel

GEMMA4_VISION = "gemma4_vision"  # vision_config's model_type of Gemma 4's tower (engine.vision.gemma4_load)


def load_vision(folder: Path, device: torch.device, dtype: torch.dtype, vocab_size: int) -> VisionModel | None:
    """None for a checkpoint without a vision_config, without the tower's tensors (a text-only export) or whose
    image token is not in the language model's vocabulary. Gemma 4's tower: engine.vision.gemma4_load."""
    config = json.loads((folder / "config.json").read_text())
    if (config.get("vision_config") or {}).get("model_type") == GEMMA4_VISION:
        return load_gemma4_vision(folder, config, device, dtype, vocab_size)
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


def tower_bytes(config: dict, dtype_bytes: int) -> int:
    """The tower's weights on the device, for the memory plan."""
    args = vision_args(config)
    if args is None:
        return 0
    with torch.device("meta"):
        tower = VisionTower(args)
    return sum(p.numel() for p in tower.parameters()) * dtype_bytes
