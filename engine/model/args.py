"""ModelArgs: one normalised view of a Hugging Face MoE config.json, whichever transformers wrote it."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.model.biased_softmax_args import BiasedSoftmaxArgs
from engine.model.linear_args import LinearAttentionArgs
from engine.model.mamba2_args import Mamba2Args
from engine.model.sandwich_args import SandwichArgs
from engine.model.short_conv_args import ShortConvArgs
from engine.model.state_layers import is_mlp_layer, is_state_layer, layer_state_bytes
from engine.model.yarn_config import Yarn, parse_yarn


@dataclass(frozen=True)
class ModelArgs:
    """Architecture numbers the engine needs; HF field names kept where they exist."""

    model_type: str
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    num_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    intermediate_size: int
    norm_topk_prob: bool
    moe_layers: tuple[bool, ...]
    attention_bias: bool = False
    o_proj_bias: bool = False
    qk_norm: str = "none"  # "none" | "per_head" (qwen3) | "full" (olmoe)
    clip_qkv: float | None = None
    shared_expert_intermediate_size: int = 0
    router_weights_fp32: bool = False  # mixtral keeps top-k weights in fp32 when scaling expert outputs
    torch_dtype: str | None = None
    rope_scaling: Yarn | None = None  # None: the default RoPE
    # gpt_oss
    layer_types: tuple[str, ...] = ()  # "sliding_attention" | "full_attention" per layer; () means all full
    sliding_window: int | None = None
    attention_sinks: bool = False  # a learned per-head logit joins every softmax (and takes no value)
    router: str = "softmax_topk"  # engine.model.routers.ROUTERS: "softmax_topk" | "topk_softmax" | "grouped"
    router_bias: bool = False
    expert_bias: bool = False  # per-expert gate_up and down biases, resident beside the dense weights
    expert_activation: str = "silu_glu"  # or "clamped_swiglu" (gpt_oss), "gelu_tanh_glu" (gemma4)
    swiglu_alpha: float = 1.702
    swiglu_limit: float = 7.0
    norm_weight_fp32: bool = False  # RMSNorm multiplies by its weight in fp32, then casts (gpt_oss)
    # DeepSeek-style MoE (glm4_moe, deepseek_v2, deepseek_v3): router "grouped", engine.model.routers
    topk_method: str | None = None  # set with router "grouped": engine.experts.routing.grouped_routing
    n_group: int = 1
    topk_group: int = 1
    routed_scaling_factor: float = 1.0
    n_shared_experts: int = 0  # ungated, always-on experts: one MLP of n_shared_experts * moe_intermediate_size
    # glm4_moe
    partial_rotary_factor: float = 1.0  # RoPE turns the first int(head_dim * factor) channels of each head
    # deepseek_v2 / deepseek_v3: multi-head latent attention (MLA). head_dim is the RoPE part, qk_rope_head_dim.
    kv_lora_rank: int = 0  # > 0: MLA; the KV cache holds kv_lora_rank + qk_rope_head_dim values per token
    q_lora_rank: int | None = None
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    rope_layout: str = "half"  # "half" (rotate_half) | "interleaved" (deepseek_v3) | "complex" (deepseek_v2)
    attention_scale: float | None = None  # softmax scale; None: head_dim ** -0.5
    # gpt_oss checkpoints with quantized experts
    expert_quant: str = ""  # the experts' block type as stored ("MXFP4"), kept so in host memory and slots
    # qwen3_next, qwen3_5_moe: layer_types mixes "linear_attention" (Gated DeltaNet) with "full_attention"
    linear: LinearAttentionArgs | None = None
    attention_output_gate: bool = False  # q_proj also yields a sigmoid gate on the attention output
    short_conv: ShortConvArgs | None = None  # lfm2_moe: layer_types' "conv" layers (engine.model.short_conv)
    mamba: Mamba2Args | None = None  # nemotron_h: layer_types' "mamba" layers (engine.model.mamba2_mixer)
    moe_latent_size: int = 0  # > 0: routed experts compute in a latent space of this size (engine.model.latent_moe)
    biased_softmax: BiasedSoftmaxArgs | None = None  # set with router "biased_softmax_topk"
    sandwich: SandwichArgs | None = None  # gemma4: engine.model.sandwich's decoder
    extra: dict = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self):
        if (self.router == "grouped") != (self.topk_method is not None):
            raise ValueError(f"ModelArgs: router '{self.router}' with topk_method {self.topk_method!r} (the grouped "
                             "router and only it reads a topk_method)")

    @property
    def num_moe_layers(self) -> int:
        return sum(self.moe_layers)

    @property
    def rotary_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary_factor)

    @property
    def expert_hidden_size(self) -> int:
        """The width of a routed expert's input and output: the latent size where the experts compute in one."""
        return self.moe_latent_size or self.hidden_size

    @property
    def expert_numel(self) -> int:
        """Elements of one expert: gate, up and down projections, stored contiguously."""
        return 3 * self.expert_hidden_size * self.moe_intermediate_size

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def attention_kind(self) -> str:
        """engine.model.transformer.ATTENTION_KINDS: "latent_attention" (MLA) or "attention" (GQA/MHA, its sliding
        window and sinks set per layer)."""
        return "latent_attention" if self.is_mla else "attention"

    def window(self, layer: int) -> int | None:
        """The sliding window of a layer's attention (keys within `window` positions, itself included), or None."""
        if self.layer_types and self.layer_types[layer] == "sliding_attention":
            return self.sliding_window
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
            return self.num_hidden_layers * (self.kv_lora_rank + self.head_dim) * dtype_bytes
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
