"""The GGUF tensors of a family whose dense tensors follow Wisp's modules one to one (GgufFormat.module_order:
gpt-oss, glm4moe): Wisp's dense parameters under llama.cpp's names (engine.gguf.param_names), then each MoE
layer's experts."""

from __future__ import annotations

from engine.gguf.param_names import gguf_name, layer_param
from engine.gguf.tensor_map import TensorSpec, as_f32, layer_expert_specs
from engine.model.args import ModelArgs

ROUTER = "ffn_gate_inp.weight"  # llama.cpp keeps routers f32, as it does every 1-D tensor and every bias


def module_order_specs(args: ModelArgs, ckpt, names, arch: str,
                       dense: list[TensorSpec] | None = None) -> list[TensorSpec]:
    """Every tensor of the file: the dense ones in Wisp's parameter order (`dense` where the family's file layout
    differs from its checkpoints', engine.gguf.linear_specs), then each MoE layer's experts."""
    specs = dense_specs(args, ckpt, names, arch) if dense is None else list(dense)
    for layer, is_moe in enumerate(args.moe_layers):
        specs += layer_expert_specs(args, ckpt, names, layer) if is_moe else []
    return specs


def keeps_f32(name: str, shape: tuple[int, ...]) -> bool:
    return len(shape) == 1 or not name.endswith(".weight") or name.endswith(ROUTER)


def dense_specs(args: ModelArgs, ckpt, names, arch: str) -> list[TensorSpec]:
    """One spec per dense parameter, in Wisp's parameter order (one per part where the family's files split it,
    GgufFormat.joined); routers, biases and 1-D tensors are written f32 whatever the file type. A tied lm_head is
    left out (llama.cpp reads token_embd)."""
    from engine.model.families import family
    from engine.model.loader import hf_name
    from engine.model.model_tree import meta_model

    gguf, specs = family(args.model_type).gguf, []
    for param, value in meta_model(args).named_parameters():
        if param == "lm_head.weight" and not ckpt.has(param):
            continue
        name, shape = gguf_name(param, arch), tuple(value.shape)
        layer, within = layer_param(param)
        if within in gguf.joined:
            specs += _split_specs(args, gguf.joined[within], layer, _loader(ckpt, hf_name(param, names)))
            continue
        if len(shape) > 2:  # llama.cpp drops size-1 dimensions: a depthwise conv [C, 1, K] is [C, K]
            shape = tuple(d for d in shape if d != 1)
        load = _loader(ckpt, hf_name(param, names), shape)
        specs.append(TensorSpec(name, shape, load, keeps_f32(name, shape) or _base(name) in gguf.f32_tensors))
    return specs


def _base(name: str) -> str:
    """The tensor base of blk.N.BASE.weight|bias; "" for the others."""
    parts = name.split(".")
    return ".".join(parts[2:-1]) if parts[0] == "blk" and len(parts) > 3 else ""


def _split_specs(args: ModelArgs, joined, layer: int, load) -> list[TensorSpec]:
    """The tensors a family's files store one parameter as (GgufFormat.joined), each computed from it."""
    return [TensorSpec(f"blk.{layer}.{part}", shape, lambda index=index: joined.split(args, load())[index],
                       joined.keep_f32)
            for index, (part, shape) in enumerate(zip(joined.parts, joined.shapes(args)))]


def _loader(ckpt, hf: str, shape: tuple[int, ...] | None = None):
    if shape is None:
        return lambda: as_f32(ckpt.get(hf))
    return lambda: as_f32(ckpt.get(hf)).reshape(shape)
