"""The GGUF tensors of Wisp's dense parameters under llama.cpp's names (engine.gguf.param_names), for the
converters of architectures whose dense tensors follow Wisp's modules one to one (gpt-oss, glm4moe)."""

from __future__ import annotations

from typing import Callable

from engine.gguf.param_names import gguf_name
from engine.gguf.tensor_map import TensorSpec, as_f32
from engine.model.args import ModelArgs


def dense_specs(args: ModelArgs, ckpt, names, arch: str,
                keeps_f32: Callable[[str, tuple[int, ...]], bool]) -> list[TensorSpec]:
    """One spec per dense parameter, in Wisp's parameter order; `keeps_f32(name, shape)` picks those written f32
    whatever the file type. A tied lm_head is left out (llama.cpp reads token_embd)."""
    from engine.model.loader import hf_name
    from engine.model.transformer import meta_model

    specs = []
    for param, value in meta_model(args).named_parameters():
        if param == "lm_head.weight" and not ckpt.has(param):
            continue
        name, shape = gguf_name(param, arch), tuple(value.shape)
        specs.append(TensorSpec(name, shape, _loader(ckpt, hf_name(param, names)), keeps_f32(name, shape)))
    return specs


def _loader(ckpt, hf: str):
    return lambda: as_f32(ckpt.get(hf))
