"""A GGUF file's metadata as a family reads it: `{arch}.NAME` keys that name themselves when missing or mistyped,
tensor shapes, and the fields most llama.cpp MoE architectures share. Torch-free, and it imports nothing of
engine.gguf: the reader hands in its open file (engine.gguf.reader.GgufFile: .path, .get(key), .tensors)."""

from __future__ import annotations

import numpy as np

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.model.attention_args import AttentionArgs
from engine.model.shared_expert_args import SharedExpertArgs


class GgufKeys:
    """`{arch}.NAME` metadata reads that name the key when it is missing or not a number."""

    def __init__(self, file, arch: str):
        self.file, self.arch, self.path = file, arch, file.path

    def integer(self, name: str, default: int | None = None) -> int:
        value = self._value(name, default)
        if isinstance(value, list):  # per-layer arrays (head counts): Wisp's layers share one value
            if len(set(value)) != 1:
                raise UnsupportedModelError(f"{self.path}: {self.arch}.{name} differs between layers ({value})")
            value = value[0]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ModelFormatError(f"{self.path}: GGUF key '{self.arch}.{name}' must be an integer, got {value!r}")
        return value

    def number(self, name: str, default: float | None = None) -> float:
        value = self._value(name, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ModelFormatError(f"{self.path}: GGUF key '{self.arch}.{name}' must be a number, got {value!r}")
        return float(str(np.float32(value)))  # GGUF stores float32: 1e-6, not 9.99999997e-07

    def get(self, name: str, default=None):
        """`{arch}.NAME` as stored, or default."""
        return self.file.get(f"{self.arch}.{name}", default)

    def has_tensor(self, name: str) -> bool:
        return name in self.file.tensors

    def shape(self, name: str) -> tuple[int, ...]:
        """A tensor's torch-order shape; ModelFormatError when the file lacks it."""
        return tuple(self.tensor(name).shape)

    def tensor(self, name: str):
        if name not in self.file.tensors:
            raise ModelFormatError(f"{self.path}: tensor '{name}' is missing")
        return self.file.tensors[name]

    def _value(self, name: str, default):
        value = self.file.get(f"{self.arch}.{name}", default)
        if value is None:
            raise ModelFormatError(f"{self.path}: required GGUF key '{self.arch}.{name}' is missing")
        return value


def config_basics(key: GgufKeys, eps: str | None = "rms_norm_eps") -> dict:
    """The Hugging Face config fields every llama.cpp architecture stores alike, under their config names: the
    vocabulary (token_embd's rows), hidden size, context length, tied embeddings and, under the family's name for
    it (eps; None leaves it out), the RMSNorm epsilon. A family's read_gguf adds the rest."""
    fields = {
        "vocab_size": key.shape("token_embd.weight")[0],
        "hidden_size": key.integer("embedding_length"),
        "max_position_embeddings": key.integer("context_length"),
        "tie_word_embeddings": not key.has_tensor("output.weight"),
    }
    if eps is not None:
        fields[eps] = key.number("attention.layer_norm_rms_epsilon")
    return fields


def common_fields(key: GgufKeys, reads_rope_scaling: bool = False, **attention) -> dict:
    """The ModelArgs fields llama.cpp's qwen3moe, qwen2moe, olmoe, llama (Mixtral) and gpt-oss files store alike:
    every field but model_type, norm_topk_prob, qk_norm and what one family adds. Refuses what Wisp's attention
    does not compute: key and value lengths apart, partial RoPE, and RoPE scaling unless the family reads it
    (reads_rope_scaling)."""
    heads = key.integer("attention.head_count")
    hidden = key.integer("embedding_length")
    head_dim = key.integer("attention.key_length", hidden // heads)
    if key.integer("attention.value_length", head_dim) != head_dim:
        raise UnsupportedModelError(f"{key.path}: key_length != value_length: Wisp's attention needs them equal")
    if key.integer("rope.dimension_count", head_dim) != head_dim:
        raise UnsupportedModelError(f"{key.path}: partial rotary embeddings ({key.arch}.rope.dimension_count < "
                                    "head_dim) are not supported by Wisp's engine")
    scaling = key.get("rope.scaling.type")
    if scaling not in (None, "none") and not reads_rope_scaling:
        raise UnsupportedModelError(f"{key.path}: RoPE scaling '{scaling}' ({key.arch}.rope.scaling.type) is not "
                                    "supported by Wisp's engine yet")
    layers = key.integer("block_count")
    layer_types = attention.pop("layer_types", ())
    moe_layers = tuple(key.has_tensor(f"blk.{i}.ffn_gate_inp.weight") for i in range(layers))
    moe_intermediate = expert_rows(key, moe_layers)
    return dict(
        vocab_size=key.shape("token_embd.weight")[0],
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=key.integer("attention.head_count_kv", heads),
        head_dim=head_dim,
        rms_norm_eps=key.number("attention.layer_norm_rms_epsilon"),
        rope_theta=key.number("rope.freq_base", 10000.0),
        max_position_embeddings=key.integer("context_length"),
        tie_word_embeddings=not key.has_tensor("output.weight"),
        num_experts=key.integer("expert_count"),
        num_experts_per_tok=key.integer("expert_used_count"),
        moe_intermediate_size=moe_intermediate,
        intermediate_size=key.integer("feed_forward_length", moe_intermediate),
        moe_layers=moe_layers,
        layer_types=layer_types,
        attention=AttentionArgs(attention_bias=key.has_tensor("blk.0.attn_q.bias"),
                                o_proj_bias=key.has_tensor("blk.0.attn_output.bias"),
                                clip_qkv=key.get("attention.clamp_kqv"), **attention),
        shared_experts=SharedExpertArgs(shared_expert_intermediate_size=shared_rows(key, moe_layers)),
    )


def expert_rows(key: GgufKeys, moe_layers: tuple[bool, ...]) -> int:
    """moe_intermediate_size from the gate tensor: stacked [E, I, D], or [I, D] per expert in older files."""
    if not any(moe_layers):
        raise UnsupportedModelError(f"{key.path}: no layer has a router (ffn_gate_inp): not a MoE model")
    layer = moe_layers.index(True)
    split = f"blk.{layer}.ffn_gate.0.weight"
    if key.has_tensor(split):
        return key.shape(split)[0]
    return key.shape(f"blk.{layer}.ffn_gate_exps.weight")[1]


def shared_rows(key: GgufKeys, moe_layers: tuple[bool, ...]) -> int:
    name = f"blk.{moe_layers.index(True)}.ffn_gate_shexp.weight"
    return key.shape(name)[0] if key.has_tensor(name) else 0
