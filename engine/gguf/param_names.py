"""Wisp's parameter names (MoeTransformer.named_parameters) -> the GGUF tensor each one is stored in: the inverse
direction of tensor_map, built from the same tables."""

from __future__ import annotations

import re

from engine.gguf.tensor_map import ATTENTION, DENSE_MLP, GLOBAL, LAYER_NORMS, QK_NORMS, SHARED_EXPERT

LAYER_PARAM = re.compile(r"^layers\.(\d+)\.(.+)\.(weight|bias)$")


def gguf_name(param: str) -> str:
    """The GGUF tensor name of a Wisp parameter; KeyError for a name with no GGUF counterpart."""
    if param in GLOBAL_PARAMS:
        return GLOBAL_PARAMS[param]
    match = LAYER_PARAM.match(param)
    if not match:
        raise KeyError(param)
    layer, module, kind = match.groups()
    return f"blk.{layer}.{LAYER_MODULES[module]}.{kind}"


def _layer_modules() -> dict[str, str]:
    modules = {f"self_attn.{hf}": gguf for hf, gguf in (ATTENTION | QK_NORMS).items()}
    modules |= LAYER_NORMS
    modules["mlp.gate"] = "ffn_gate_inp"
    modules |= {f"mlp.shared.{hf}": gguf for hf, gguf in SHARED_EXPERT.items()}
    modules |= {f"mlp.{hf}": gguf for hf, gguf in DENSE_MLP.items()}
    return modules


GLOBAL_PARAMS = {hf.removeprefix("model."): gguf for hf, gguf in GLOBAL.items()}
LAYER_MODULES = _layer_modules()
