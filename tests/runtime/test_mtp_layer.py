"""The draft (MTP / nextn) layer computes the published math. transformers drops these weights, so the reference is
written here: the input norms, the projection over [embedding | hidden] and the output norm as small torch
functions (after vLLM's qwen3_next_mtp.py and deepseek_mtp.py), around transformers' own decoder layer of the
family built at index num_hidden_layers and given the draft layer's tensors. The hidden states are transformers'
main model's; both sides run fp32 over a whole prompt (causal attention over the draft layer's own KV)."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from engine.api import Engine, EngineOptions
from engine.model.attention import AttentionMetadata, SeqSpan
from tests.mtp_checkpoints import CENTRED_NORMS, MTP_TYPES, QWEN_LAYOUT, mtp_model_dir  # noqa: F401 - the fixture

TOKENS = [5, 17, 3, 99, 42, 7, 7, 64, 8, 21, 13, 2]


def rms(x: torch.Tensor, weight: torch.Tensor, eps: float, centred: bool) -> torch.Tensor:
    normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return normed * (1.0 + weight if centred else weight)


def hf_parts(folder, model_type: str, tokens: list[int] = TOKENS):
    """(text config, embedding, rotary, lm_head, main model's final hidden states [T, D] of tokens)."""
    from transformers import AutoModelForCausalLM, AutoModelForImageTextToText

    if model_type == "qwen3_5_moe":
        model = AutoModelForImageTextToText.from_pretrained(folder, dtype=torch.float32)
        text = model.model.language_model
    else:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        text = model.model
    ids = torch.tensor([tokens])
    with torch.no_grad():
        hidden = text(input_ids=ids).last_hidden_state[0]
    return text.config, text.embed_tokens, text.rotary_emb, model.lm_head, hidden


def hf_decoder_layer(config, model_type: str, tensors: dict, prefix: str):
    """transformers' decoder layer of the family at index num_hidden_layers (a full-attention MoE layer)."""
    import copy
    import importlib

    config = copy.deepcopy(config)
    index = config.num_hidden_layers
    config.num_hidden_layers = index + 1
    if getattr(config, "layer_types", None):
        config.layer_types = list(config.layer_types) + ["full_attention"]
    config._attn_implementation = "eager"
    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    name = {"qwen3_next": "Qwen3NextDecoderLayer", "qwen3_5_moe": "Qwen3_5MoeDecoderLayer",
            "qwen3_moe": "Qwen3MoeDecoderLayer", "glm4_moe": "Glm4MoeDecoderLayer", "deepseek_v3": "DeepseekV3DecoderLayer"}[model_type]
    layer = getattr(module, name)(config, index).float().eval()
    state = {key[len(prefix):]: t for key, t in tensors.items() if key.startswith(prefix)}
    state = {key: t for key, t in state.items() if not key.startswith(("enorm", "hnorm", "eh_proj", "shared_head"))}
    if any(key.startswith("mlp.experts.0.") for key in state) and hasattr(layer.mlp.experts, "gate_up_proj"):
        experts = range(config.num_experts if hasattr(config, "num_experts") else config.n_routed_experts)
        gate_up = [torch.cat([state.pop(f"mlp.experts.{e}.{name}_proj.weight") for name in ("gate", "up")])
                   for e in experts]
        state["mlp.experts.gate_up_proj"] = torch.stack(gate_up)
        state["mlp.experts.down_proj"] = torch.stack([state.pop(f"mlp.experts.{e}.down_proj.weight") for e in experts])
    missing, unexpected = layer.load_state_dict(state, strict=False)
    assert not unexpected and all("rotary" in key for key in missing), (missing, unexpected)
    return layer


def reference_logits(folder, model_type: str) -> torch.Tensor:
    """The draft layer's logits [T, V] at positions 0..T-2 (the token after each from TOKENS)."""
    config, embed, rotary, lm_head, hidden = hf_parts(folder, model_type)
    (shard,) = folder.glob("*.safetensors")
    tensors = load_file(shard)
    qwen, centred = model_type in QWEN_LAYOUT, model_type in CENTRED_NORMS
    eps, N = config.rms_norm_eps, config.num_hidden_layers
    prefix = "mtp." if qwen else f"model.layers.{N}."
    names = (["pre_fc_norm_embedding", "pre_fc_norm_hidden", "fc", "norm"] if qwen
             else ["enorm", "hnorm", "eh_proj", "shared_head.norm"])
    embed_norm, hidden_norm, proj, out_norm = (tensors[f"{prefix}{name}.weight"] for name in names)
    count = len(TOKENS) - 1
    positions = torch.arange(count)
    with torch.no_grad():
        embeds = embed(torch.tensor(TOKENS[1:]))  # [T, D]: the token after each position
        if not qwen:
            embeds[positions == 0] = 0.0  # DeepSeek's MTP masks the embedding at position 0
        inputs = [rms(embeds, embed_norm, eps, centred), rms(hidden[:count], hidden_norm, eps, centred)]
        x = torch.cat(inputs, dim=-1) @ proj.T  # [T, D]
        layer = hf_decoder_layer(config, model_type, tensors, prefix + "layers.0." if qwen else prefix)
        rope = rotary(x[None], positions[None])
        mask = torch.full((count, count), float("-inf")).triu(1)[None, None]
        x = layer(x[None], position_embeddings=rope, attention_mask=mask, position_ids=positions[None])
        x = x[0] if isinstance(x, tuple) else x
        head = tensors.get(f"{prefix}shared_head.head.weight", lm_head.weight)
        return rms(x[0], out_norm, eps, centred) @ head.T


def wisp_logits(folder) -> torch.Tensor:
    """Wisp's draft layer over the same positions, with transformers' hidden states as its input."""
    with Engine(EngineOptions(model=str(folder), device="cpu", speculative="mtp")) as engine:
        draft = engine._core.speculation.drafter.draft
        model_type = engine.info.model_type
        *_, hidden = hf_parts(folder, model_type)
        count = len(TOKENS) - 1
        slots = torch.arange(count)
        meta = AttentionMetadata(slot_mapping=slots, spans=[SeqSpan(0, count, slots)])
        with torch.inference_mode():
            _, head_input = draft.forward(torch.tensor(TOKENS[1:]), hidden[:count], torch.arange(count), meta)
            return draft.logits(head_input)


@pytest.mark.parametrize("model_type", MTP_TYPES)
def test_draft_layer_matches_the_published_math(mtp_model_dir, model_type):  # noqa: F811
    folder = mtp_model_dir(model_type)
    expected, got = reference_logits(folder, model_type), wisp_logits(folder)
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected.float(), atol=1e-4, rtol=1e-4)
