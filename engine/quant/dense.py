"""Dense (non-expert) GGUF tensors on the device: kept in their blocks (engine.quant.quant_modules) where the
layer is a linear map or the token embedding and the type is one the quantized GEMV runs, else expanded by Wisp's
own dequantization (the Triton kernel on CUDA, the bytes going to the device once, quantized; the torch reference
on the CPU). `dequantize_dense` fits engine.gguf.weights.load_gguf_weights's `dequantize` hook."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from engine.errors import ModelFormatError
from engine.quant.linear import QuantLinearSpec, dequantize
from engine.quant.quant_modules import QuantEmbedding, QuantLinear, scratch_bytes
from engine.quant.types import BLOCK_TYPES, quant_type

KEPT_TYPES = tuple(t.name for t in BLOCK_TYPES)  # dense tensors of these types stay in their blocks
FLOAT_MODULES = ("kv_b_proj",)  # MLA folds this weight into the query and the output (it reads .weight)


def quantizable_params(model: nn.Module) -> dict[str, nn.Module]:
    """Parameter name -> its module, for the weights a quantized layer can hold: every nn.Linear's but those in
    FLOAT_MODULES, and the token embedding's."""
    found = {}
    for name, module in model.named_modules():
        kind_ok = isinstance(module, nn.Embedding) or (
            isinstance(module, nn.Linear) and name.rpartition(".")[2] not in FLOAT_MODULES)
        if kind_ok:
            found[f"{name}.weight"] = module
    return found


def kept_params(model: nn.Module, types: dict[str, str]) -> set[str]:
    """The parameters (Wisp names) whose file type (`types`: Wisp name -> type name) keeps them in blocks."""
    return {param for param in quantizable_params(model) if types.get(param) in KEPT_TYPES}


def dense_spec(type_name: str, shape: tuple[int, ...]) -> QuantLinearSpec:
    """A [rows..., columns] tensor of type_name as a matrix of blocks."""
    columns = shape[-1] if shape else 1
    return QuantLinearSpec(quant_type(type_name), math.prod(shape[:-1]), columns)


def raw_blocks(tensor, device: torch.device | str = "cpu") -> tuple[torch.Tensor, QuantLinearSpec]:
    """engine.gguf.tensors.DenseTensor -> (its blocks, uint8 [nbytes] on device, a copy never the mapping; spec)."""
    spec = dense_spec(tensor.type_name, tuple(tensor.shape))
    raw = torch.from_numpy(np.array(tensor.raw, dtype=np.uint8, copy=True).reshape(-1))
    if raw.numel() != spec.nbytes:
        raise ModelFormatError(f"{tensor.name}: {raw.numel()} bytes, a {spec.qtype.name} tensor of shape "
                               f"{tuple(tensor.shape)} is {spec.nbytes}")
    return raw.to(device), spec


def dequantize_dense(tensor, dtype: torch.dtype, device: torch.device | str = "cpu") -> torch.Tensor:
    """engine.gguf.tensors.DenseTensor (raw blocks of a `shape` tensor) -> a dense `shape` tensor of dtype."""
    raw, spec = raw_blocks(tensor, device)
    return dequantize(raw, spec, dtype).view(tuple(tensor.shape))


def install_quantized(model: nn.Module, blocks: dict[str, tuple[torch.Tensor, QuantLinearSpec]],
                      dtype: torch.dtype) -> None:
    """Replace the module of every parameter in `blocks` (Wisp name -> (uint8 blocks, spec)) by its quantized
    layer; an embedding's lookups give dtype. A bias stays a (meta) parameter, for load_state_dict to assign."""
    for param, (raw, spec) in blocks.items():
        name = param.rpartition(".")[0]
        old = model.get_submodule(name)
        new = QuantEmbedding(raw, spec, dtype) if isinstance(old, nn.Embedding) else QuantLinear(
            raw, spec, bias=getattr(old, "bias", None) is not None)
        parent, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, attr, new)


def kept_bytes(model: nn.Module, types: dict[str, str], dtype_bytes: int) -> tuple[int, int, int]:
    """What keeping `types`' quantized parameters in blocks changes in a dtype_bytes model: (bytes saved against
    holding them in dtype, of which in shared experts, the largest dequantization scratch a prompt step takes)."""
    params = dict(model.named_parameters())
    saved = shared = scratch = 0
    for param in kept_params(model, types):
        shape = tuple(params[param].shape)
        spec = dense_spec(types[param], shape)
        saving = math.prod(shape) * dtype_bytes - spec.nbytes
        saved += saving
        shared += saving if ".mlp.shared." in param else 0
        if not param.startswith("embed_tokens."):
            scratch = max(scratch, scratch_bytes(spec, dtype_bytes))
    if "lm_head.weight" not in types and "embed_tokens.weight" in kept_params(model, types):  # tied: lm_head reads
        spec = dense_spec(types["embed_tokens.weight"], tuple(params["embed_tokens.weight"].shape))  # its blocks
        scratch = max(scratch, scratch_bytes(spec, dtype_bytes))
    return saved, shared, scratch


def sizes_in_blocks(sizes, tree: nn.Module, types: dict[str, str]):
    """engine.alloc.memory_plan.ModelSizes of `tree` (a meta model) with the parameters of `types` (Wisp name ->
    type name: a GGUF file's, or what --dense-quant gives) held in blocks: the dense weights at their block bytes,
    plus the scratch of the largest one a prompt step dequantizes."""
    import dataclasses

    saved, shared, scratch = kept_bytes(tree, types, sizes.dtype_bytes)
    return dataclasses.replace(sizes, dense_bytes=sizes.dense_bytes - saved + scratch,
                               shared_expert_bytes=sizes.shared_expert_bytes - shared)
