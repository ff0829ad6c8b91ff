"""Write a trained MoeLM as a Hugging Face checkpoint: config.json, model.safetensors (per-expert
keys, exactly the names transformers' save_pretrained writes for the model type) and
generation_config.json."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from engine.model.families import family
from training.moe_model import MoeLM
from training.presets import ArchSpec

END_OF_TEXT_ID, IM_END_ID = 0, 2
ARCHITECTURES = {"qwen3_moe": "Qwen3MoeForCausalLM", "olmoe": "OlmoeForCausalLM", "mixtral": "MixtralForCausalLM"}


def hf_state_dict(model: MoeLM, dtype: torch.dtype) -> dict[str, torch.Tensor]:
    names = family(model.arch.model_type).weight_names  # the checkpoint names the engine's loader reads
    expert_names = {"gate_proj": names.gate, "up_proj": names.up, "down_proj": names.down}  # ours -> the family's
    tensors = {}
    for name, tensor in model.state_dict().items():
        tensor = tensor.detach().to("cpu", dtype)
        if name == "lm_head.weight":
            tensors[name] = tensor
        elif ".mlp." in name:
            layer_prefix, param = name.split(".mlp.")
            hf_prefix = f"model.{layer_prefix}.{names.block}"
            if param == "gate.weight":
                tensors[f"{hf_prefix}.{names.router}.weight"] = tensor
            else:
                for expert, weight in enumerate(tensor):
                    tensors[f"{hf_prefix}.experts.{expert}.{expert_names[param]}.weight"] = weight.contiguous()
        else:
            tensors[f"model.{name}"] = tensor
    return tensors


def hf_config(arch: ArchSpec, dtype: str = "bfloat16") -> dict:
    config = {
        "architectures": [ARCHITECTURES[arch.model_type]],
        "model_type": arch.model_type,
        "vocab_size": arch.vocab_size,
        "hidden_size": arch.hidden_size,
        "num_hidden_layers": arch.num_layers,
        "num_attention_heads": arch.num_heads,
        "num_key_value_heads": arch.num_kv_heads,
        "head_dim": arch.head_dim,
        "num_experts_per_tok": arch.top_k,
        "hidden_act": "silu",
        "rms_norm_eps": arch.rms_norm_eps,
        "rope_theta": arch.rope_theta,
        "max_position_embeddings": arch.max_position_embeddings,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "tie_word_embeddings": False,
        "initializer_range": 0.02,
        "output_router_logits": False,
        "router_aux_loss_coef": 0.01,
        "bos_token_id": None,
        "eos_token_id": IM_END_ID,
        "pad_token_id": END_OF_TEXT_ID,
        "use_cache": True,
        "torch_dtype": dtype,
    }
    return config | type_specific_config(arch)


def type_specific_config(arch: ArchSpec) -> dict:
    if arch.model_type == "qwen3_moe":
        return {"num_experts": arch.num_experts, "moe_intermediate_size": arch.moe_intermediate_size,
                "intermediate_size": 4 * arch.hidden_size, "norm_topk_prob": arch.norm_topk_prob,
                "decoder_sparse_step": 1, "mlp_only_layers": [], "sliding_window": None,
                "use_sliding_window": False, "rope_scaling": None}
    if arch.model_type == "olmoe":
        return {"num_experts": arch.num_experts, "intermediate_size": arch.moe_intermediate_size,
                "norm_topk_prob": arch.norm_topk_prob, "clip_qkv": None, "rope_scaling": None}
    return {"num_local_experts": arch.num_experts, "intermediate_size": arch.moe_intermediate_size,
            "sliding_window": None, "router_jitter_noise": 0.0}


def generation_config() -> dict:
    return {"bos_token_id": None, "eos_token_id": [IM_END_ID, END_OF_TEXT_ID], "pad_token_id": END_OF_TEXT_ID,
            "do_sample": False}


def save_checkpoint(model: MoeLM, out: Path, dtype: torch.dtype = torch.bfloat16) -> None:
    out.mkdir(parents=True, exist_ok=True)
    save_file(hf_state_dict(model, dtype), str(out / "model.safetensors"), metadata={"format": "pt"})
    dtype_name = str(dtype).removeprefix("torch.")
    (out / "config.json").write_text(json.dumps(hf_config(model.arch, dtype_name), indent=2) + "\n")
    (out / "generation_config.json").write_text(json.dumps(generation_config(), indent=2) + "\n")
