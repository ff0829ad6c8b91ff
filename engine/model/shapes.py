"""Layer geometry of well-known MoE models, by name: `wisp configure --model qwen3-30b-a3b` plans for one
without its weights, and `wisp bench` builds synthetic weights of the same shape (docs/design.md)."""

from __future__ import annotations

from dataclasses import replace

from engine.model.args import ModelArgs
from engine.model.attention_args import AttentionArgs
from engine.model.families import FAMILIES, parse_config
from engine.model.router_args import RouterArgs


def _published(config: dict) -> ModelArgs:
    """A published config.json parsed as a checkpoint's is, so the shape has every field its architecture reads;
    bf16, as the benchmarks build it."""
    return replace(parse_config(config), torch_dtype="bfloat16")


def _topology_tiny(args: ModelArgs) -> ModelArgs:
    """The shape's layers and expert topology (and attention kinds) at toy width: CPU tests of the benchmark
    harness with the shape's traces. A sliding window shrinks to 8 so that short prompts cross it."""
    shared = replace(args.shared_experts,
                     shared_expert_intermediate_size=48 if args.shared_experts.shared_expert_intermediate_size else 0)
    attention = replace(args.attention, sliding_window=8 if args.attention.sliding_window else None)
    return replace(args, vocab_size=512, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                   moe_intermediate_size=32, intermediate_size=96 if args.intermediate_size else 0,
                   shared_experts=shared, attention=attention, torch_dtype="float32")


def _args(**kw) -> ModelArgs:
    layers = kw["num_hidden_layers"]
    defaults = dict(rms_norm_eps=1e-6, max_position_embeddings=32768, tie_word_embeddings=False,
                    intermediate_size=0, torch_dtype="bfloat16", moe_layers=(True,) * layers)
    return ModelArgs(**{**defaults, **kw})


SHAPES: dict[str, ModelArgs] = {
    "qwen3-30b-a3b": _args(model_type="qwen3_moe", vocab_size=151936, hidden_size=2048, num_hidden_layers=48,
                           num_attention_heads=32, num_key_value_heads=4, head_dim=128, rope_theta=1e6,
                           num_experts=128, num_experts_per_tok=8, moe_intermediate_size=768,
                           router=RouterArgs(norm_topk_prob=True), attention=AttentionArgs(qk_norm="per_head")),
    "olmoe-1b-7b": _args(model_type="olmoe", vocab_size=50304, hidden_size=2048, num_hidden_layers=16,
                         num_attention_heads=16, num_key_value_heads=16, head_dim=128, rope_theta=1e4,
                         num_experts=64, num_experts_per_tok=8, moe_intermediate_size=1024,
                         router=RouterArgs(norm_topk_prob=False), attention=AttentionArgs(qk_norm="full"),
                         rms_norm_eps=1e-5),
    "mixtral-8x7b": _args(model_type="mixtral", vocab_size=32000, hidden_size=4096, num_hidden_layers=32,
                          num_attention_heads=32, num_key_value_heads=8, head_dim=128, rope_theta=1e6,
                          num_experts=8, num_experts_per_tok=2, moe_intermediate_size=14336,
                          router=RouterArgs(norm_topk_prob=True, weights_fp32=True), rms_norm_eps=1e-5),
    # Each family's published config.json (Family.shapes, engine/model/published_configs.py)
    **{name: _published(config) for family in FAMILIES.values() for name, config in family.shapes.items()},
    # The Qwen3-30B-A3B expert topology at toy width: CPU tests of the benchmark harness with its traces.
    "qwen3-topology-tiny": _args(model_type="qwen3_moe", vocab_size=512, hidden_size=64, num_hidden_layers=48,
                                 num_attention_heads=4, num_key_value_heads=2, head_dim=16, rope_theta=1e6,
                                 num_experts=128, num_experts_per_tok=8, moe_intermediate_size=32,
                                 router=RouterArgs(norm_topk_prob=True), attention=AttentionArgs(qk_norm="per_head"),
                                 torch_dtype="float32"),
}
SHAPES["gpt-oss-20b-topology-tiny"] = _topology_tiny(SHAPES["gpt-oss-20b"])
SHAPES["glm-4.5-air-topology-tiny"] = _topology_tiny(SHAPES["glm-4.5-air"])
SHAPES["nemotron-3-nano-topology-tiny"] = _topology_tiny(SHAPES["nemotron-3-nano-30b-a3b"])
SHAPES["qwen3.5-topology-tiny"] = _topology_tiny(SHAPES["qwen3.5-35b-a3b"])  # wisp bench --image on the CPU


def shape(name: str, num_layers: int | None = None) -> ModelArgs:
    """A named shape, optionally cut to its first num_layers layers (host RAM limits)."""
    args = SHAPES[name]
    if num_layers is None or num_layers == args.num_hidden_layers:
        return args
    cut = replace(args, num_hidden_layers=num_layers, moe_layers=args.moe_layers[:num_layers],
                  layer_types=args.layer_types[:num_layers])
    if cut.num_kv_layers == 0 and args.num_kv_layers > 0:  # the KV cache and its plan need one attention layer
        first = next(i for i in range(args.num_hidden_layers)
                     if replace(args, num_hidden_layers=i + 1, moe_layers=args.moe_layers[:i + 1],
                                layer_types=args.layer_types[:i + 1]).num_kv_layers)
        raise ValueError(f"--layers {num_layers} of {name} keeps no attention layer (its first is layer {first}): "
                         f"cut at {first + 1} or more")
    return cut
