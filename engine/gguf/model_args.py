"""ModelArgs from a GGUF file's metadata (`{arch}.*` keys) and tensor shapes, for the architectures Wisp's engine
runs: qwen3moe, qwen2moe, olmoe, llama with experts (Mixtral), gpt-oss and glm4moe (their own fields:
engine.gguf.gpt_oss, engine.gguf.glm4_moe)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.gguf import glm4_moe, gpt_oss
from engine.gguf.reader import GgufFile
from engine.gguf.tensor_map import ARCHITECTURES
from engine.model.args import ModelArgs

# llama.cpp architecture -> Wisp's model_type; whether llama.cpp's graph renormalises top-k comes from ARCHITECTURES
MODEL_TYPES = {arch: model_type for model_type, (arch, _) in ARCHITECTURES.items()}
RENORMALISES = {arch: renormalises for arch, renormalises in ARCHITECTURES.values()}
QK_NORM = {"qwen3moe": "per_head", "olmoe": "full"}
# GGMLQuantizationType of the embedding -> torch_dtype; a quantized file computes in bf16 (its dense weights are
# dequantized to it), which engine.model.loader.resolve_dtype applies on a GPU like a checkpoint's own dtype.
FLOAT_DTYPES = {0: "float32", 1: "float16", 30: "bfloat16"}
QUANTIZED_DTYPE = "bfloat16"
SUPPORTED = "qwen3moe, qwen2moe, olmoe, llama with experts (Mixtral), gpt-oss, glm4moe (GLM-4.5)"


def architecture_of(file: GgufFile) -> str:
    """general.architecture; ModelFormatError when missing."""
    arch = file.get("general.architecture")
    if not isinstance(arch, str):
        raise ModelFormatError(f"{file.path}: no general.architecture in the GGUF metadata")
    return arch


def check_architecture(file: GgufFile) -> str:
    """The architecture, or UnsupportedModelError naming it when Wisp's engine does not run it."""
    arch = architecture_of(file)
    if arch not in MODEL_TYPES:
        raise UnsupportedModelError(f"{file.path}: architecture '{arch}' is not one Wisp's engine runs ({SUPPORTED})")
    if not int(file.get(f"{arch}.expert_count") or 0) > 1:
        raise UnsupportedModelError(f"{file.path}: a dense '{arch}' model (no {arch}.expert_count); Wisp's engine "
                                    "runs Mixture-of-Experts models")
    return arch


def model_args(file: GgufFile) -> ModelArgs:
    """Every ModelArgs field from the metadata, checked against the tensors. Raises UnsupportedModelError for an
    architecture or feature the engine does not run, ModelFormatError naming a missing or inconsistent key."""
    arch = check_architecture(file)
    key = _Keys(file, arch)
    facts = {"torch_dtype": FLOAT_DTYPES.get(_tensor(file, "token_embd.weight").qtype, QUANTIZED_DTYPE),
             "extra": {"gguf_architecture": arch, "gguf_path": str(file.path)}}
    if arch == glm4_moe.ARCH:
        return replace(glm4_moe.model_args(file, key, _tensor), **facts)
    heads = key.integer("attention.head_count")
    hidden = key.integer("embedding_length")
    head_dim = key.integer("attention.key_length", hidden // heads)
    if key.integer("attention.value_length", head_dim) != head_dim:
        raise UnsupportedModelError(f"{file.path}: key_length != value_length: Wisp's attention needs them equal")
    if key.integer("rope.dimension_count", head_dim) != head_dim:
        raise UnsupportedModelError(f"{file.path}: partial rotary embeddings ({arch}.rope.dimension_count < "
                                    "head_dim) are not supported by Wisp's engine")
    scaling = file.get(f"{arch}.rope.scaling.type")
    if scaling not in (None, "none") and arch != gpt_oss.ARCH:
        raise UnsupportedModelError(f"{file.path}: RoPE scaling '{scaling}' ({arch}.rope.scaling.type) is not "
                                    "supported by Wisp's engine yet")
    layers = key.integer("block_count")
    moe_layers = tuple(f"blk.{i}.ffn_gate_inp.weight" in file.tensors for i in range(layers))
    experts = key.integer("expert_count")
    moe_intermediate = _expert_rows(file, moe_layers)
    own = gpt_oss.gpt_oss_fields(file, key, layers) if arch == gpt_oss.ARCH else {}
    return ModelArgs(
        model_type=MODEL_TYPES[arch],
        vocab_size=_tensor(file, "token_embd.weight").shape[0],
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=key.integer("attention.head_count_kv", heads),
        head_dim=head_dim,
        rms_norm_eps=key.number("attention.layer_norm_rms_epsilon"),
        rope_theta=key.number("rope.freq_base", 10000.0),
        max_position_embeddings=key.integer("context_length"),
        tie_word_embeddings="output.weight" not in file.tensors,
        num_experts=experts,
        num_experts_per_tok=key.integer("expert_used_count"),
        moe_intermediate_size=moe_intermediate,
        intermediate_size=key.integer("feed_forward_length", moe_intermediate),
        norm_topk_prob=RENORMALISES[arch],
        moe_layers=moe_layers,
        attention_bias="blk.0.attn_q.bias" in file.tensors,
        o_proj_bias="blk.0.attn_output.bias" in file.tensors,
        qk_norm=QK_NORM.get(arch, "none"),
        clip_qkv=file.get(f"{arch}.attention.clamp_kqv"),
        shared_expert_intermediate_size=_shared_rows(file, moe_layers),
        router_weights_fp32=arch == "llama",
        **facts,
        **own,
    )


class _Keys:
    """`{arch}.NAME` metadata reads that name the key when it is missing or not a number."""

    def __init__(self, file: GgufFile, arch: str):
        self.file, self.arch = file, arch

    def integer(self, name: str, default: int | None = None) -> int:
        value = self._value(name, default)
        if isinstance(value, list):  # per-layer arrays (head counts): Wisp's layers share one value
            if len(set(value)) != 1:
                raise UnsupportedModelError(f"{self.file.path}: {self.arch}.{name} differs between layers ({value})")
            value = value[0]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ModelFormatError(f"{self.file.path}: GGUF key '{self.arch}.{name}' must be an integer, got {value!r}")
        return value

    def number(self, name: str, default: float | None = None) -> float:
        value = self._value(name, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ModelFormatError(f"{self.file.path}: GGUF key '{self.arch}.{name}' must be a number, got {value!r}")
        return float(str(np.float32(value)))  # GGUF stores float32: 1e-6, not 9.99999997e-07

    def _value(self, name: str, default):
        value = self.file.get(f"{self.arch}.{name}", default)
        if value is None:
            raise ModelFormatError(f"{self.file.path}: required GGUF key '{self.arch}.{name}' is missing")
        return value


def _tensor(file: GgufFile, name: str):
    if name not in file.tensors:
        raise ModelFormatError(f"{file.path}: tensor '{name}' is missing")
    return file.tensors[name]


def _expert_rows(file: GgufFile, moe_layers: tuple[bool, ...]) -> int:
    """moe_intermediate_size from the gate tensor: stacked [E, I, D], or [I, D] per expert in older files."""
    if not any(moe_layers):
        raise UnsupportedModelError(f"{file.path}: no layer has a router (ffn_gate_inp): not a MoE model")
    layer = moe_layers.index(True)
    split = f"blk.{layer}.ffn_gate.0.weight"
    if split in file.tensors:
        return file.tensors[split].shape[0]
    return _tensor(file, f"blk.{layer}.ffn_gate_exps.weight").shape[1]


def _shared_rows(file: GgufFile, moe_layers: tuple[bool, ...]) -> int:
    name = f"blk.{moe_layers.index(True)}.ffn_gate_shexp.weight"
    return file.tensors[name].shape[0] if name in file.tensors else 0
