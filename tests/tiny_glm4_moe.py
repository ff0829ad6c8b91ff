"""A tiny random glm4_moe (GLM-4.5-Air's layout) written by transformers, its config.json rewritten with the keys
as the published GLM-4.5-Air config.json spells them (rope_theta and partial_rotary_factor at the top level)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

# Grouped routing (n_group 2, topk_group 1) and a routed_scaling_factor other than 1 exercise every step of the
# noaux_tc router; GLM-4.5-Air itself has one group and a factor of 1.
GLM4_MOE = dict(n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=32, intermediate_size=96,
                n_shared_experts=1, first_k_dense_replace=1, n_group=2, topk_group=1, routed_scaling_factor=2.5,
                norm_topk_prob=True, head_dim=32, attention_bias=True, use_qk_norm=False, partial_rotary_factor=0.5,
                rope_theta=10000.0)


def hf_glm4_moe(common: dict, **overrides):
    from transformers import Glm4MoeConfig, Glm4MoeForCausalLM

    config = Glm4MoeConfig(**{**common, "num_hidden_layers": 3, **GLM4_MOE, **overrides})
    return Glm4MoeForCausalLM(config)


def randomize_correction_bias(model) -> None:
    """e_score_correction_bias is a buffer (write_tiny_model randomises parameters only); make it matter."""
    with torch.no_grad():
        for name, buffer in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                buffer.normal_(0.0, 0.15)


def hub_style_config(folder: Path) -> None:
    """Rewrite config.json as the published checkpoints spell it; transformers reads both spellings."""
    path = folder / "config.json"
    config = json.loads(path.read_text())
    rope = config.pop("rope_parameters")
    config.update(rope_theta=rope["rope_theta"], partial_rotary_factor=rope["partial_rotary_factor"],
                  rope_scaling=None, torch_dtype=config.pop("dtype"))
    path.write_text(json.dumps(config, indent=2))
