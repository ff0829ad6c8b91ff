"""Hugging Face checkpoints whose experts are MXFP4 (config.json `quantization_config.quant_method` "mxfp4", as
gpt-oss is published; engine.model.checkpoint_quant reads that): the experts stay MXFP4 in a quantized store
(engine.quant.layout), repacked from the checkpoint's `*_blocks` / `*_scales` (engine.quant.mxfp4_hf) one layer
at a time; every other tensor is dense. `args` is engine.model.args.ModelArgs, `ckpt` an engine.model.checkpoint
Checkpoint and `names` its MoeWeightNames (engine.model imports this module, not the other way round).

Shapes: E experts of a layer, D hidden size, I expert intermediate size; `*_blocks` [E, rows, cols / 32, 16]."""

from __future__ import annotations

import torch

from engine.errors import ModelFormatError
from engine.experts.formats.store import ExpertStore
from engine.quant.layout import QuantLayout
from engine.quant.mxfp4_hf import expert_rows
from engine.quant.types import MXFP4

MXFP4_EXPERTS = (MXFP4.name,) * 3  # gate, up, down


def mxfp4_layout(args, moe_layers: list[int], activation, biases: dict | None = None) -> QuantLayout:
    """The store layout of MXFP4 experts: every MoE layer's gate, up and down MXFP4."""
    return QuantLayout(args.hidden_size, args.moe_intermediate_size, {layer: MXFP4_EXPERTS for layer in moe_layers},
                       activation, biases)


def load_mxfp4_experts(store: ExpertStore, args, ckpt, names, progress=None) -> None:
    """Every layer's `gate_up_proj` and `down_proj` blocks and scales -> the store's slot rows (padding zeroed)."""
    for done, (layer, rows) in enumerate(store.blocks.items()):
        fmt = store.layout.for_layer(layer)
        matrices = expert_rows(*blocks_and_scales(args, ckpt, names, layer, "gate_up_proj"),
                               *blocks_and_scales(args, ckpt, names, layer, "down_proj"))
        for start, end in fmt.padding():
            rows[:, start:end] = 0
        for spec, raw in zip((fmt.gate, fmt.up, fmt.down), matrices):
            rows[:, spec.byte_offset : spec.end].copy_(raw.reshape(raw.shape[0], -1))
        if progress:
            progress((done + 1) / len(store.blocks), f"experts of layer {layer}")


def blocks_and_scales(args, ckpt, names, layer: int, projection: str):
    """(blocks, scales) of one projection, shapes checked against the config."""
    E, D, I = args.num_experts, args.hidden_size, args.moe_intermediate_size
    rows, cols = (2 * I, D) if projection == "gate_up_proj" else (D, I)
    if cols % MXFP4.block_size:
        raise ModelFormatError(f"{projection}: {cols} input features are not whole {MXFP4.block_size}-element "
                               "MXFP4 blocks")
    blocks = ckpt.get(names.fused_weight(layer, f"{projection}_blocks"), (E, rows, cols // 32, 16))
    scales = ckpt.get(names.fused_weight(layer, f"{projection}_scales"), (E, rows, cols // 32))
    return blocks.view(torch.uint8), scales.view(torch.uint8)
