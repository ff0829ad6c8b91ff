"""Wisp's parameter names (MoeTransformer.named_parameters) -> the GGUF tensor each one is stored in: the inverse
direction of tensor_map, built from the same tables."""

from __future__ import annotations

import re

from engine.gguf import glm4_moe, gpt_oss
from engine.gguf.tensor_map import ATTENTION, DENSE_MLP, GLOBAL, LAYER_NORMS, QK_NORMS, SHARED_EXPERT

LAYER_PARAM = re.compile(r"^layers\.(\d+)\.(.+)\.(weight|bias)$")
BARE_PARAM = re.compile(r"^layers\.(\d+)\.(self_attn\.sinks)$")  # stored as llama.cpp's {name}.weight
# where an architecture names a module its own way
ARCH_MODULES = {gpt_oss.ARCH: gpt_oss.LAYER_MODULES, glm4_moe.ARCH: glm4_moe.LAYER_MODULES}


def gguf_name(param: str, arch: str = "") -> str:
    """The GGUF tensor name of a Wisp parameter in a file of llama.cpp architecture `arch`; KeyError for a name
    with no GGUF counterpart."""
    if param in GLOBAL_PARAMS:
        return GLOBAL_PARAMS[param]
    if (bias := glm4_moe.correction_bias_name(param)) is not None:
        return bias
    match = LAYER_PARAM.match(param)
    bare = BARE_PARAM.match(param)
    if not (match or bare):
        raise KeyError(param)
    layer, module, kind = match.groups() if match else (*bare.groups(), "weight")
    modules = ARCH_MODULES.get(arch, {})
    return f"blk.{layer}.{modules.get(module) or LAYER_MODULES[module]}.{kind}"


def _layer_modules() -> dict[str, str]:
    modules = {f"self_attn.{hf}": gguf for hf, gguf in (ATTENTION | QK_NORMS).items()}
    modules |= LAYER_NORMS
    modules["mlp.gate"] = "ffn_gate_inp"
    modules |= {f"mlp.shared.{hf}": gguf for hf, gguf in SHARED_EXPERT.items()}
    modules |= {f"mlp.{hf}": gguf for hf, gguf in DENSE_MLP.items()}
    return modules


GLOBAL_PARAMS = {hf.removeprefix("model."): gguf for hf, gguf in GLOBAL.items()}
LAYER_MODULES = _layer_modules()
