"""Gemma 4's vision tower from a safetensors checkpoint (model.vision_tower.*, model.embed_vision.*), on the device in
the compute dtype, with the image processing of its processor config."""

from __future__ import annotations

from pathlib import Path

import torch

from engine.vision.gemma4_args import gemma4_vision_args, token_id
from engine.vision.gemma4_preprocess import Gemma4ImageProcessing
from engine.vision.gemma4_tower import Gemma4VisionTower
from engine.vision.gemma4_vision_model import Gemma4VisionModel
from engine.vision.tower_files import read_tensor, tower_shards

PREFIXES = ("model.vision_tower.", "model.embed_vision.")


def load_gemma4_vision(folder: Path, config: dict, device: torch.device, dtype: torch.dtype,
                       vocab_size: int) -> Gemma4VisionModel | None:
    """None without the tower's tensors or with an image token outside the vocabulary (as load_vision)."""
    args = gemma4_vision_args(config)
    if args is None or not 0 <= args.image_token_id < vocab_size:
        return None
    shards = tower_shards(folder, PREFIXES)
    if "model.vision_tower.patch_embedder.input_proj.weight" not in shards:
        return None
    with torch.device("meta"):
        tower = Gemma4VisionTower(args)
    state = {name: read_tensor(folder, shards, "model." + name, tuple(value.shape)).to(dtype)
             for name, value in tower.state_dict().items()}
    tower = tower.to_empty(device=device).to(dtype)
    tower.load_state_dict(state)
    tower.inv_freq = Gemma4VisionTower.rotary_frequencies(args).to(device)
    processing = Gemma4ImageProcessing.from_folder(folder, args.patch_size, args.pooling_kernel_size)
    text = config.get("text_config") or config
    return Gemma4VisionModel(tower.eval(), processing, device, token_id(config, "boi_token_id"),
                             token_id(config, "eoi_token_id"), text.get("use_bidirectional_attention") == "vision")
