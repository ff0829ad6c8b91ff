"""Read a Hugging Face checkpoint that training.export wrote back into a MoeLM (the inverse of export.hf_state_dict),
so that a trained model can be trained further or frozen under a new part (training.train_mtp)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from engine.model.families import family
from training.moe_model import MoeLM
from training.presets import ArchSpec


def arch_from_config(config: dict) -> ArchSpec:
    return ArchSpec(
        config["model_type"], config["vocab_size"], config["hidden_size"], config["num_hidden_layers"],
        config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"],
        config.get("num_experts") or config["num_local_experts"], config["num_experts_per_tok"],
        config.get("moe_intermediate_size") or config["intermediate_size"], bool(config.get("norm_topk_prob")),
        rope_theta=config["rope_theta"], rms_norm_eps=config["rms_norm_eps"],
        max_position_embeddings=config["max_position_embeddings"])


def our_tensor(name: str, tensors: dict[str, torch.Tensor], arch: ArchSpec) -> torch.Tensor:
    """One MoeLM parameter from the checkpoint's tensors (experts stacked [E, out, in])."""
    if name == "lm_head.weight":
        return tensors[name]
    if ".mlp." not in name:
        return tensors[f"model.{name}"]
    names = family(arch.model_type).weight_names
    layer_prefix, param = name.split(".mlp.")
    prefix = f"model.{layer_prefix}.{names.block}"
    if param == "gate.weight":
        return tensors[f"{prefix}.{names.router}.weight"]
    projection = {"gate_proj": names.gate, "up_proj": names.up, "down_proj": names.down}[param]
    return torch.stack([tensors[f"{prefix}.experts.{e}.{projection}.weight"] for e in range(arch.num_experts)])


def load_moe_lm(folder: Path) -> MoeLM:
    """The checkpoint in folder (config.json, model.safetensors) as an fp32 MoeLM in eval mode."""
    arch = arch_from_config(json.loads((folder / "config.json").read_text()))
    tensors = load_file(str(folder / "model.safetensors"))
    model = MoeLM(arch)
    state = {name: our_tensor(name, tensors, arch).float() for name in model.state_dict()}
    model.load_state_dict(state, strict=True)
    return model.eval()
