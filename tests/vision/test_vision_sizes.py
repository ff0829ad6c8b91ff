"""The memory plan counts a vision tower: its weights (counted from the config, equal to the module's) and one
largest image's activations, inside the dense bytes; each image's tokens are prompt tokens (KV like any other)."""

import json

import torch

from engine.model.loader import read_args
from engine.model.sizes import dense_bytes
from engine.vision.tower import VisionTower
from engine.vision.vision_args import PUBLISHED_MAX_PIXELS, vision_args


def test_the_tower_params_counted_from_the_config_are_the_modules(tiny_vl_dir):
    from transformers import Qwen3_5MoeConfig

    for config in (json.loads((tiny_vl_dir / "config.json").read_text()), Qwen3_5MoeConfig().to_dict()):
        args = vision_args(config)
        with torch.device("meta"):
            tower = VisionTower(args)
        assert args.num_params == sum(p.numel() for p in tower.parameters())


def test_dense_bytes_hold_the_tower_and_one_image(tiny_vl_dir):
    from dataclasses import replace

    args = read_args(tiny_vl_dir)
    vision = vision_args(json.loads((tiny_vl_dir / "config.json").read_text()))
    text_only = replace(args, extra={k: v for k, v in args.extra.items() if not k.startswith("vision")})
    expected = (vision.num_params + vision.workspace_elements(PUBLISHED_MAX_PIXELS)) * 2
    assert dense_bytes(args, 2) - dense_bytes(text_only, 2) == expected
