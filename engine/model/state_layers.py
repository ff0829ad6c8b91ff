"""The layer types of a hybrid model that keep a fixed-size state per sequence instead of a KV cache, and the
ModelArgs sub-spec that holds each one's numbers: params(hidden_size) and state_shapes(hidden_size), the states of
one sequence as (shape, kept fp32) pairs, which the state cache allocates and the planner counts."""

from __future__ import annotations

from math import prod

# layer type (ModelArgs.layer_types) -> the ModelArgs field of its sub-spec: LinearAttentionArgs (Gated DeltaNet),
# ShortConvArgs (engine.model.short_conv), Mamba2Args (engine.model.mamba2_mixer)
STATE_LAYER_SPECS = {"linear_attention": "linear", "conv": "short_conv", "mamba": "mamba"}
FP32_BYTES = 4
# layer types of a block stack (nemotron_h: one block per layer) that hold the MLP alone: routed experts or dense
MLP_LAYERS = ("moe", "mlp")


# state layers whose static-shape decode step steps a verify step's rows of one sequence in order
# (engine.model.state_chains): Gated DeltaNet
CHAINING_STATE_LAYERS = ("linear_attention",)


def is_state_layer(kind: str) -> bool:
    return kind in STATE_LAYER_SPECS


def is_mlp_layer(kind: str) -> bool:
    return kind in MLP_LAYERS


def is_block_stack(layer_types: tuple[str, ...]) -> bool:
    """Each layer one block (a token mixer or an MLP), rather than a token mixer and an MLP."""
    return any(is_mlp_layer(kind) for kind in layer_types)


def chains_verify_rows(layer_types: tuple[str, ...]) -> bool:
    """Whether a hybrid's verify steps can take the static-shape step: every state layer chains its rows."""
    kinds = [kind for kind in layer_types if is_state_layer(kind)]
    return bool(kinds) and all(kind in CHAINING_STATE_LAYERS for kind in kinds)


def state_spec(args, kind: str):
    return getattr(args, STATE_LAYER_SPECS[kind])


def state_shapes(args) -> list[tuple[tuple[tuple[int, ...], bool], ...]]:
    """Each state layer's states, in layer order (a layer's index among the state layers is its state cache's)."""
    return [state_spec(args, kind).state_shapes(args.hidden_size) for kind in args.layer_types if is_state_layer(kind)]


def layer_state_bytes(args, kind: str, dtype_bytes: int) -> int:
    """One sequence's state in one layer of the type (0 for a layer without one)."""
    if not is_state_layer(kind):
        return 0
    shapes = state_spec(args, kind).state_shapes(args.hidden_size)
    return sum(prod(shape) * (FP32_BYTES if fp32 else dtype_bytes) for shape, fp32 in shapes)
