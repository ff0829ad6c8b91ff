"""Tiny checkpoints with a draft (MTP / nextn) layer: tests/tiny_models.py's, with random draft-layer tensors added
in the layout the published checkpoints use (transformers drops them when it saves a model). `copying`: the layers
of the model and of the draft layer add nothing to the residual stream, and the draft layer passes the next token's
embedding through, so that it predicts what the model will: its drafts are accepted."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

MTP_TYPES = ("qwen3_next", "qwen3_5_moe", "qwen3_moe", "glm4_moe", "deepseek_v3")
QWEN_LAYOUT = ("qwen3_next", "qwen3_5_moe", "qwen3_moe")  # mtp.*; the others: model.layers.{N}. (nextn)
CENTRED_NORMS = ("qwen3_next", "qwen3_5_moe")  # their norms' weights hold w - 1
ZEROED = ("o_proj.weight", "out_proj.weight", "down_proj.weight")  # what a layer adds to the residual stream


def layer_prefix(names: dict, model_type: str) -> tuple[str, int]:
    """The main layer whose tensors' shapes the draft layer takes (the last full-attention MoE layer) and N."""
    prefix = "model.language_model.layers." if model_type == "qwen3_5_moe" else "model.layers."
    count = 1 + max(int(name[len(prefix):].split(".")[0]) for name in names if name.startswith(prefix))
    return f"{prefix}{count - 1}.", count


def draft_tensors(tensors: dict, model_type: str, copying: bool, generator: torch.Generator) -> dict:
    source, count = layer_prefix(tensors, model_type)
    embed = next(t for name, t in tensors.items() if name.endswith("embed_tokens.weight"))
    final_norm = next(t for name, t in tensors.items() if name.endswith("model.norm.weight") or
                      name.endswith("language_model.norm.weight"))
    D = embed.shape[1]
    qwen, centred = model_type in QWEN_LAYOUT, model_type in CENTRED_NORMS
    target = "mtp.layers.0." if qwen else f"model.layers.{count}."

    def random_like(tensor):
        return torch.randn(tensor.shape, generator=generator) * (0.1 if tensor.dim() == 1 else 0.15)

    added = {target + name[len(source):]: random_like(t) for name, t in tensors.items() if name.startswith(source)}
    if not qwen:  # noaux_tc's correction bias, as the model's
        added.update({target + name[len(source):]: t.clone() for name, t in tensors.items()
                      if name.startswith(source) and name.endswith("e_score_correction_bias")})
    proj = torch.randn(D, 2 * D, generator=generator) * 0.15
    unit = torch.zeros(D) if centred else torch.ones(D)  # a centred norm's weight of 0 scales by 1
    norms = [random_like(final_norm) + (0 if centred else 1) for _ in range(3)]
    if copying:
        proj = torch.cat([torch.eye(D), torch.zeros(D, D)], dim=1)
        norms = [unit, unit.clone(), final_norm.clone()]
        added = {name: (t.zero_() if name.endswith(ZEROED) else t) for name, t in added.items()}
    if qwen:
        added.update({"mtp.pre_fc_norm_embedding.weight": norms[0], "mtp.pre_fc_norm_hidden.weight": norms[1],
                      "mtp.fc.weight": proj, "mtp.norm.weight": norms[2]})
    else:
        added.update({target + "enorm.weight": norms[0], target + "hnorm.weight": norms[1],
                      target + "eh_proj.weight": proj, target + "shared_head.norm.weight": norms[2]})
        if model_type == "deepseek_v3":  # DeepSeek-V3 ships the head again; GLM's files leave it to lm_head
            added[target + "shared_head.head.weight"] = tensors["lm_head.weight"].clone()
    return added


def write_mtp_model(tiny_folder: Path, folder: Path, model_type: str, copying: bool = False) -> Path:
    shutil.copytree(tiny_folder, folder, dirs_exist_ok=True)
    (shard,) = folder.glob("*.safetensors")
    tensors = load_file(shard)
    generator = torch.Generator().manual_seed(5)
    added = draft_tensors(tensors, model_type, copying, generator)
    if copying:
        tensors = {name: (t.zero_() if name.endswith(ZEROED) and "visual" not in name else t)
                   for name, t in tensors.items()}
    dtype = next(t.dtype for name, t in tensors.items() if name.endswith("embed_tokens.weight"))
    added = {name: t.to(dtype).contiguous() for name, t in added.items()}  # in the checkpoint's dtype, as published
    save_file({**tensors, **added}, str(shard), metadata={"format": "pt"})
    config_path = folder / "config.json"
    config = json.loads(config_path.read_text())
    if model_type == "qwen3_5_moe":
        config["text_config"]["mtp_num_hidden_layers"] = 1
    elif model_type in QWEN_LAYOUT:
        config["mtp_num_hidden_layers"] = 1
    else:
        config["num_nextn_predict_layers"] = 1
    config_path.write_text(json.dumps(config, indent=2))
    return folder


@pytest.fixture
def mtp_model_dir(run_artifact, tiny_model_dir):
    """(model_type, copying=False) -> a read-only tiny checkpoint with a draft layer, built once per test run."""

    def get(model_type: str, copying: bool = False) -> Path:
        name = f"mtp-{model_type}-{'copying' if copying else 'random'}"
        return run_artifact(name, lambda folder: write_mtp_model(tiny_model_dir(model_type), folder, model_type,
                                                                 copying))
    return get
