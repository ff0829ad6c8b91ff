"""One quantized layer for an attention's q_proj, k_proj and v_proj where their blocks allow it, so a decode step
runs one GEMV launch for them instead of three (a launch-bound step: issue 37).

A GGUF row of a given type and width has a fixed size, so the blocks of matrices of one type and in_features
concatenated along their rows are a valid matrix of their summed rows. Consecutive projections (in q, k, v order)
of one type and width, all with or all without a bias, become one QuantLinear whose `parts` are the originals; its
output splits into theirs (engine.model.attention.Attention.project_qkv). In llama.cpp's Q4_K_M files attn_v is
often Q6_K while q and k are Q4_K: then q and k merge and v stays alone. Float layers (nn.Linear) are left as they
are.

The bits do not change: the decode GEMVs (engine.quant.linear) compute each output row alone, in an order and a
split fixed by the matrix's type and in_features; quant_matmul's tiles reduce each output over K alone; a long step
that dequantizes runs each part as its own layer (QuantLinear.forward, split). The blocks are concatenated once and
the originals dropped, so the device bytes do not grow (weight_bytes is the same).

Off unless EngineOptions.merge_qkv asks (docs/configuration.md): the merged layers give the parts' bits on the CPU
and the GPU, but one decode profile could not tell the merged step's time from the separate one's."""

from __future__ import annotations

import torch
from torch import nn

from engine.quant.linear import QuantLinearSpec
from engine.quant.quant_modules import QuantLinear

PROJECTIONS = ("q_proj", "k_proj", "v_proj")  # engine.model.attention.Attention.projection_names before a merge


def merge_projections(model: nn.Module) -> None:
    """Merge the projections of every engine.model.attention.Attention in the model (GatedAttention too; MLA has no
    projection_names) where they can share a layer. Run once the biases are loaded."""
    for module in list(model.modules()):  # merging changes the modules under each attention
        if getattr(module, "projection_names", None) == PROJECTIONS:
            merge_attention(module)


def merge_attention(attention: nn.Module) -> None:
    """Replace each group of mergeable projections by one layer named after them (qkv_proj, qk_proj, kv_proj)."""
    names = []
    for group in mergeable_groups([(name, getattr(attention, name)) for name in attention.projection_names]):
        if len(group) == 1:
            names.append(group[0])
            continue
        merged = merged_linear([getattr(attention, name) for name in group])
        for name in group:
            delattr(attention, name)
        name = "".join(part[0] for part in group) + "_proj"
        setattr(attention, name, merged)
        names.append(name)
    attention.projection_names = tuple(names)


def mergeable_groups(layers: list[tuple[str, nn.Module]]) -> list[tuple[str, ...]]:
    """Names of consecutive layers that can be one: QuantLinear, one type, one width, bias alike."""
    groups: list[list[str]] = []
    last = None
    for name, layer in layers:
        key = (layer.spec.qtype, layer.in_features, layer.bias is None) if isinstance(layer, QuantLinear) else None
        if key is not None and key == last:
            groups[-1].append(name)
        else:
            groups.append([name])
        last = key
    return [tuple(group) for group in groups]


def merged_linear(layers: list[QuantLinear]) -> QuantLinear:
    """One QuantLinear whose rows are the layers' rows, in order; its parts are the layers' matrices."""
    first = layers[0].spec
    blocks = torch.cat([layer.spec.raw(layer.blocks).reshape(-1) for layer in layers])
    parts, offset = [], 0
    for layer in layers:
        parts.append(QuantLinearSpec(first.qtype, layer.out_features, first.in_features, offset))
        offset += layer.spec.nbytes
    spec = QuantLinearSpec(first.qtype, sum(part.out_features for part in parts), first.in_features)
    merged = QuantLinear(blocks, spec, bias=layers[0].bias is not None, parts=tuple(parts))
    if merged.bias is not None:
        merged.bias = nn.Parameter(torch.cat([layer.bias for layer in layers]), requires_grad=False)
    return merged


def projection_specs(attention: nn.Module) -> dict[str, QuantLinearSpec]:
    """An Attention's q_proj, k_proj and v_proj matrices as they were loaded (QuantLinear layers only), merged or
    not."""
    specs = {}
    originals = iter(PROJECTIONS)
    for name in attention.projection_names:
        layer = getattr(attention, name)
        for part in getattr(layer, "parts", (None,)):
            original = next(originals)
            if part is not None:
                specs[original] = QuantLinearSpec(part.qtype, part.out_features, part.in_features)
    return specs
