"""Checkpoint layouts users have: sharded safetensors, published-style configs, bf16, stacked expert tensors."""

from __future__ import annotations

import json
import shutil

import torch
from safetensors.torch import load_file, save_file

from engine.model.loader import load_weights, read_args, resolve_dtype
from tests.model.test_models import prompt_logits
from tests.tiny_models import save_tokenizer

IDS = [5, 17, 42, 99, 100, 7, 250, 3]


def test_sharded_checkpoint_loads_like_single_file(tiny_model_dir, tmp_path):
    single = tiny_model_dir("mixtral")
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(single, dtype=torch.float32)
    model.save_pretrained(tmp_path, max_shard_size="20KB")
    save_tokenizer(tmp_path)
    assert (tmp_path / "model.safetensors.index.json").exists()
    assert len(list(tmp_path.glob("*.safetensors"))) > 2
    assert torch.equal(prompt_logits(tmp_path, IDS), prompt_logits(single, IDS))


def test_published_style_config_fields(tiny_model_dir, tmp_path):
    """Configs as released with real checkpoints: rope_theta at top level, num_experts, torch_dtype."""
    folder = tmp_path / "published"
    shutil.copytree(tiny_model_dir("qwen3_moe"), folder)
    config = json.loads((folder / "config.json").read_text())
    theta = config.pop("rope_parameters")["rope_theta"]
    config.update(rope_theta=theta, rope_scaling=None, num_experts=config.pop("num_local_experts", 8),
                  torch_dtype="float32")
    config.pop("dtype", None)
    (folder / "config.json").write_text(json.dumps(config))
    args = read_args(folder)
    assert args.rope_theta == theta and args.num_experts == 8 and args.torch_dtype == "float32"
    assert torch.equal(prompt_logits(folder, IDS), prompt_logits(tiny_model_dir("qwen3_moe"), IDS))


def test_auto_dtype_honours_torch_dtype_on_gpu_and_computes_fp32_on_cpu(tiny_model_dir, tmp_path):
    folder = tmp_path / "bf16"
    shutil.copytree(tiny_model_dir("olmoe"), folder)
    config = json.loads((folder / "config.json").read_text())
    config["dtype"] = "bfloat16"
    (folder / "config.json").write_text(json.dumps(config))
    assert resolve_dtype("auto", read_args(folder), torch.device("cuda")) == torch.bfloat16
    assert resolve_dtype("auto", read_args(folder), torch.device("cpu")) == torch.float32
    weights = load_weights(folder, torch.device("cpu"), "bfloat16")
    assert weights.dtype == torch.bfloat16
    assert weights.model.embed_tokens.weight.dtype == torch.bfloat16
    assert next(iter(weights.store.blocks.values())).dtype == torch.bfloat16


def test_stacked_expert_tensors_load_like_per_expert(tiny_model_dir, tmp_path):
    """Some recent checkpoints store experts stacked: experts.gate_up_proj [E, 2I, D], experts.down_proj [E, D, I]."""
    source = tiny_model_dir("qwen3_moe")
    state = load_file(source / "model.safetensors")
    args = read_args(source)
    for layer in range(args.num_hidden_layers):
        prefix = f"model.layers.{layer}.mlp.experts"
        pop = lambda e, p: state.pop(f"{prefix}.{e}.{p}.weight")  # noqa: E731
        experts = range(args.num_experts)
        state[f"{prefix}.gate_up_proj"] = torch.stack([torch.cat([pop(e, "gate_proj"), pop(e, "up_proj")]) for e in experts])
        state[f"{prefix}.down_proj"] = torch.stack([pop(e, "down_proj") for e in experts])
    folder = tmp_path / "stacked"
    shutil.copytree(source, folder)
    save_file(state, folder / "model.safetensors")
    assert torch.equal(prompt_logits(folder, IDS), prompt_logits(source, IDS))
