"""ModelArgs: one normalised view of a Hugging Face MoE config.json, whichever transformers wrote it."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.model.attention_args import AttentionArgs
from engine.model.biased_softmax_args import BiasedSoftmaxArgs
from engine.model.expert_args import ExpertArgs
from engine.model.latent_attention_args import LatentAttentionArgs
from engine.model.linear_args import LinearAttentionArgs
from engine.model.mamba2_args import Mamba2Args
from engine.model.router_args import RouterArgs
from engine.model.sandwich_args import SandwichArgs
from engine.model.shared_expert_args import SharedExpertArgs
from engine.model.short_conv_args import ShortConvArgs
from engine.model.state_layers import is_mlp_layer, is_state_layer, layer_state_bytes
from engine.model.yarn_config import Yarn, parse_yarn


@dataclass(frozen=True)
class ModelArgs:
    """Architecture numbers the engine needs; HF field names kept where they exist. The sizes every model has sit
    here; each layer's variants sit in a sub-spec, the one its shared block reads."""

    model_type: str
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int  # MLA: the RoPE part of each head, qk_rope_head_dim
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    num_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    intermediate_size: int
    moe_layers: tuple[bool, ...]
    router: RouterArgs
    # what each layer is: "full_attention" | "sliding_attention", a state layer ("linear_attention", "conv", "mamba":
    # engine.model.state_layers), a block stack's "moe" | "mlp"; () means all full attention
    layer_types: tuple[str, ...] = ()
    attention: AttentionArgs = AttentionArgs()
    experts: ExpertArgs = ExpertArgs()
    shared_experts: SharedExpertArgs = SharedExpertArgs()
    mla: LatentAttentionArgs | None = None  # set: multi-head latent attention instead of GQA/MHA
    linear: LinearAttentionArgs | None = None  # set: layer_types mixes "linear_attention" (Gated DeltaNet) layers in
    short_conv: ShortConvArgs | None = None  # lfm2_moe: layer_types' "conv" layers (engine.model.short_conv)
    mamba: Mamba2Args | None = None  # nemotron_h: layer_types' "mamba" layers (engine.model.mamba2_mixer)
    biased_softmax: BiasedSoftmaxArgs | None = None  # set with router kind "biased_softmax_topk"
    sandwich: SandwichArgs | None = None  # gemma4: engine.model.sandwich's decoder
    torch_dtype: str | None = None
    rope_scaling: Yarn | None = None  # None: the default RoPE
    norm_weight_fp32: bool = False  # RMSNorm multiplies by its weight in fp32, then casts (gpt_oss)
    extra: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def num_moe_layers(self) -> int:
        return sum(self.moe_layers)

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.attention.partial_rotary_factor)

    @property
    def expert_hidden_size(self) -> int:
        """The width of a routed expert's input and output: the latent size where the experts compute in one."""
        return self.experts.latent_size or self.hidden_size

    @property
    def expert_numel(self) -> int:
        """Elements of one expert: gate, up and down projections, stored contiguously."""
        return 3 * self.expert_hidden_size * self.moe_intermediate_size

    @property
    def is_mla(self) -> bool:
        return self.mla is not None

    @property
    def attention_kind(self) -> str:
        """engine.model.transformer.ATTENTION_KINDS: "latent_attention" (MLA) or "attention" (GQA/MHA, its sliding
        window and sinks set per layer)."""
        return "latent_attention" if self.is_mla else "attention"

    def window(self, layer: int) -> int | None:
        """The sliding window of a layer's attention (keys within `window` positions, itself included), or None."""
        if self.layer_types and self.layer_types[layer] == "sliding_attention":
            return self.attention.sliding_window
        return None

    @property
    def is_hybrid(self) -> bool:
        """Some layers keep a fixed-size state per sequence instead of a KV cache (engine.model.state_layers)."""
        return self.num_linear_layers > 0

    @property
    def num_kv_layers(self) -> int:
        """Layers that keep a KV cache (all but the state layers and a block stack's MLP layers)."""
        return self.num_hidden_layers - self.num_linear_layers - sum(is_mlp_layer(kind) for kind in self.layer_types)

    @property
    def num_linear_layers(self) -> int:
        """Layers with a state per sequence: linear attention, short conv, Mamba-2 (engine.model.state_layers)."""
        return sum(is_state_layer(kind) for kind in self.layer_types)

    def state_bytes_per_seq(self, dtype_bytes: int) -> int:
        """The state layers' state of one sequence (conv, recurrent), whatever its length."""
        return sum(layer_state_bytes(self, kind, dtype_bytes) for kind in self.layer_types)

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """K and V of every layer that has a KV cache. Sliding-window layers count in full too: every layer's pool
        shares one block table, so a sliding layer keeps (and is planned for) positions its window no longer reads."""
        if self.is_mla:  # one compressed row per layer: normed c_kv and the rotated shared k_pe
            return self.num_hidden_layers * (self.mla.kv_lora_rank + self.head_dim) * dtype_bytes
        if self.sandwich is not None:  # layers of two shapes
            return self.sandwich.kv_bytes_per_token(self.layer_types, self.num_key_value_heads, self.head_dim,
                                                    dtype_bytes)
        return 2 * self.num_kv_layers * self.num_key_value_heads * self.head_dim * dtype_bytes


def require(config: dict, key: str, kind: type = int):
    """Read a required config field, naming it when it is missing or has the wrong type."""
    if key not in config or config[key] is None:
        raise ModelFormatError(f"config.json: required field '{key}' is missing")
    value = config[key]
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise ModelFormatError(f"config.json: field '{key}' must be an integer, got {value!r}")
    if kind is float and not isinstance(value, (int, float)):
        raise ModelFormatError(f"config.json: field '{key}' must be a number, got {value!r}")
    return value


def first_present(config: dict, *keys: str, default=None):
    for key in keys:
        if config.get(key) is not None:
            return config[key]
    return default


def rope_params(config: dict) -> dict:
    params = config.get("rope_parameters") or config.get("rope_scaling") or {}
    if not isinstance(params, dict):
        raise ModelFormatError("config.json: 'rope_parameters' must be an object")
    return params


def rope_type(config: dict, scaling_types: tuple[str, ...] = ()) -> str:
    """The config's RoPE type; refuses a scaling type the architecture does not implement."""
    kind = rope_params(config).get("rope_type", rope_params(config).get("type", "default")) or "default"
    if kind != "default" and kind not in scaling_types:
        supported = " or ".join(("default", *scaling_types))
        raise UnsupportedModelError(
            f"config.json: RoPE scaling type '{kind}' is not supported for '{config.get('model_type')}' "
            f"(only {supported} RoPE)"
        )
    return kind


def rope_theta(config: dict, default: float, scaling_types: tuple[str, ...] = ()) -> float:
    """rope_theta from the published field or from recent transformers' rope_parameters. scaling_types: the RoPE
    scaling types (engine.model.rope_scaling) the architecture implements besides the default."""
    rope_type(config, scaling_types)
    return float(first_present(rope_params(config), "rope_theta", default=config.get("rope_theta", default)))


def rope_scaling(config: dict, scaling_types: tuple[str, ...] = ()) -> Yarn | None:
    """The config's RoPE scaling (None for the default RoPE)."""
    if rope_type(config, scaling_types) == "yarn":
        return parse_yarn(rope_params(config), config)
    return None


def moe_layer_flags(config: dict, num_layers: int, num_experts: int) -> tuple[bool, ...]:
    """Which layers hold experts (Qwen's decoder_sparse_step and mlp_only_layers)."""
    step = config.get("decoder_sparse_step") or 1
    dense_layers = set(config.get("mlp_only_layers") or [])
    return tuple(
        num_experts > 0 and i not in dense_layers and (i + 1) % step == 0 for i in range(num_layers)
    )


def common_args(config: dict, num_experts: int, default_theta: float, scaling_types: tuple[str, ...] = ()) -> dict:
    """Fields every supported architecture shares; scaling_types as rope_theta takes them."""
    hidden = require(config, "hidden_size")
    heads = require(config, "num_attention_heads")
    layers = require(config, "num_hidden_layers")
    if hidden <= 0 or heads <= 0 or layers <= 0:
        raise ModelFormatError("config.json: hidden_size, num_attention_heads and num_hidden_layers must be positive")
    return dict(
        vocab_size=require(config, "vocab_size"),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=config.get("num_key_value_heads") or heads,
        head_dim=config.get("head_dim") or hidden // heads,
        rms_norm_eps=float(first_present(config, "rms_norm_eps", default=1e-6)),
        rope_theta=rope_theta(config, default_theta, scaling_types),
        rope_scaling=rope_scaling(config, scaling_types),
        max_position_embeddings=config.get("max_position_embeddings") or 4096,
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        num_experts=num_experts,
        num_experts_per_tok=require(config, "num_experts_per_tok"),
        moe_layers=moe_layer_flags(config, layers, num_experts),
        torch_dtype=first_present(config, "torch_dtype", "dtype"),
    )
