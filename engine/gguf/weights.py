"""The weights of a GGUF MoE file as Wisp's engine loads them: dense parameters under Wisp's names, either kept in
their blocks (engine.quant.quant_modules: linear layers and the token embedding of a type the quantized GEMV runs)
or dequantized into a state dict; routed experts left as raw block views of the memory-mapped file."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from engine.gguf.model_file import GgufModel
from engine.gguf.tensors import DenseTensor, ExpertLayer
from engine.model.args import ModelArgs
from engine.quant.linear import QuantLinearSpec

Progress = Callable[[float, str], None]
Dequantize = Callable[[DenseTensor, torch.dtype, torch.device | str], torch.Tensor]


@dataclass
class GgufWeights:
    """`state_dict` fits MoeTransformer.load_state_dict(strict=True, assign=True) once the layers in `quantized`
    (Wisp parameter name -> (uint8 blocks on the device, spec)) are installed (dense_model does both; lm_head is the
    embedding itself when the file ties them); `experts` maps each MoE layer to its stacked raw tensors."""

    args: ModelArgs
    state_dict: dict[str, torch.Tensor]
    experts: dict[int, ExpertLayer]
    model: GgufModel
    quantized: dict[str, tuple[torch.Tensor, QuantLinearSpec]] = field(default_factory=dict)


def param_types(model: GgufModel) -> dict[str, str]:
    """Wisp parameter name -> the type its GGUF tensor is stored in (lm_head absent when the file ties it)."""
    from engine.gguf.param_names import gguf_name
    from engine.model.model_tree import meta_model

    types, arch = model.tensor_types(), model.architecture
    names = {param: gguf_name(param, arch) for param, _ in meta_model(model.args).named_parameters()}
    return {param: types[name] for param, name in names.items() if name in types}


def load_gguf_weights(path: Path | str, dtype: torch.dtype, device: torch.device | str = "cpu",
                      progress: Progress | None = None, dequantize: Dequantize | None = None,
                      keep_types: bool = False) -> GgufWeights:
    """Open `path`; every dense tensor is dequantized to `dtype` on `device`, except (keep_types) the linear layers'
    and the token embedding's of a type engine.quant.dense.KEPT_TYPES names, whose blocks go to `device` as they
    are. Experts are not read (their views page in from the file when copied). `dequantize(tensor, dtype, device)`
    replaces the gguf package's numpy reference (DenseTensor.dequantize), e.g. with a GPU kernel. Raises
    UnsupportedModelError / ModelFormatError with the reason."""
    from engine.model.fp32_parameters import fp32_parameter_names
    from engine.model.model_tree import meta_model
    from engine.quant.dense import kept_params, raw_blocks

    model = GgufModel(path)
    model.check()
    dense = model.dense_tensors()
    tree = meta_model(model.args)
    fp32 = fp32_parameter_names(tree)  # DeepSeek-style routers stay fp32, as in a checkpoint
    kept = kept_params(tree, {param: tensor.type_name for param, tensor in dense.items()}) if keep_types else set()
    state, quantized = {}, {}
    for done, (param, tensor) in enumerate(dense.items()):
        if param in kept:
            quantized[param] = raw_blocks(tensor, device)
        else:
            target = torch.float32 if param in fp32 else dtype
            state[param] = dequantize(tensor, target, device) if dequantize else tensor.dequantize(target, device)
        if progress:
            progress((done + 1) / len(dense), param)
    if "lm_head.weight" not in dense:  # tied: lm_head reads the embedding's weight (or blocks)
        if "embed_tokens.weight" in quantized:
            quantized["lm_head.weight"] = quantized["embed_tokens.weight"]
        else:
            state["lm_head.weight"] = state["embed_tokens.weight"]
    return GgufWeights(model.args, state, model.expert_layers(), model, quantized)


def dense_model(weights: GgufWeights, dtype: torch.dtype, device: torch.device | str, merge_qkv: bool = False):
    """The model tree holding the file's dense weights: the quantized layers installed, the rest assigned, and with
    merge_qkv the attention projections merged where they can share a layer (engine.quant.merged_projections,
    EngineOptions.merge_qkv). The blocks move
    into the model: weights.quantized keeps the names and specs, its blocks replaced by empty tensors, so that the
    merged layers' originals are freed."""
    from engine.model.model_tree import meta_model
    from engine.quant.dense import install_quantized
    from engine.quant.merged_projections import merge_projections

    model = meta_model(weights.args)
    install_quantized(model, weights.quantized, dtype)
    weights.quantized = {param: (blocks.new_empty(0), spec) for param, (blocks, spec) in weights.quantized.items()}
    model.load_state_dict(weights.state_dict, strict=True, assign=True)
    if merge_qkv:
        merge_projections(model)
    model.attach_rotary(device)
    return model.eval()
