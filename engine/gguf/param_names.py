"""Wisp's parameter names (MoeTransformer.named_parameters) -> the GGUF tensor each one is stored in: the inverse
direction of tensor_map, built from the same tables."""

from __future__ import annotations

import re

from engine.gguf.tensor_map import ATTENTION, DENSE_MLP, GLOBAL, LAYER_NORMS, QK_NORMS, SHARED_EXPERT
from engine.model.families import gguf_family

LAYER_PARAM = re.compile(r"^layers\.(\d+)\.(.+)$")
# parameters that are not a module's weight or bias -> their GGUF tensor within blk.N
BARE_PARAMS = {"self_attn.sinks": "attn_sinks.weight", "mlp.gate.e_score_correction_bias": "exp_probs_b.bias"}


def gguf_name(param: str, arch: str = "") -> str:
    """The GGUF tensor name of a Wisp parameter in a file of llama.cpp architecture `arch`; KeyError for a name
    with no GGUF counterpart."""
    own = gguf_family(arch)
    if own is not None and param in own.gguf.global_params:
        return own.gguf.global_params[param]
    if param in GLOBAL_PARAMS:
        return GLOBAL_PARAMS[param]
    match = LAYER_PARAM.match(param)
    if not match:
        raise KeyError(param)
    layer, rest = match.groups()
    bare = {**BARE_PARAMS, **own.gguf.layer_params} if own is not None else BARE_PARAMS
    if rest in bare:
        return f"blk.{layer}.{bare[rest]}"
    module, _, kind = rest.rpartition(".")
    if kind not in ("weight", "bias"):
        raise KeyError(param)
    modules = own.gguf.layer_modules if own is not None else {}  # where the family names a module its own way
    return f"blk.{layer}.{modules.get(module) or LAYER_MODULES[module]}.{kind}"


def _layer_modules() -> dict[str, str]:
    modules = {f"self_attn.{hf}": gguf for hf, gguf in (ATTENTION | QK_NORMS).items()}
    modules |= LAYER_NORMS
    modules["mlp.gate"] = "ffn_gate_inp"
    modules |= {f"mlp.shared.{hf}": gguf for hf, gguf in SHARED_EXPERT.items()}
    modules |= {f"mlp.{hf}": gguf for hf, gguf in DENSE_MLP.items()}
    return modules


def layer_param(param: str) -> tuple[int, str]:
    """(N, the name within the layer) of a Wisp parameter layers.N.*; (-1, "") for the others."""
    match = LAYER_PARAM.match(param)
    return (int(match.group(1)), match.group(2)) if match else (-1, "")


GLOBAL_PARAMS = {hf.removeprefix("model."): gguf for hf, gguf in GLOBAL.items()}
LAYER_MODULES = _layer_modules()
