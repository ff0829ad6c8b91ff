"""Experts stacked per layer with gate and up interleaved column by column (gpt-oss's bf16 checkpoints): the HF
tensors -> Wisp's expert blocks, and the expert biases -> resident per-layer tensors
(engine.experts.formats.activation.ExpertBias).

Shapes: E experts of a layer, D hidden size, I expert intermediate size."""

from __future__ import annotations

import torch

from engine.config import Progress
from engine.errors import UnsupportedModelError
from engine.experts.formats.activation import ExpertBias
from engine.experts.formats.store import ExpertStore
from engine.model.args import ModelArgs
from engine.model.checkpoint import Checkpoint
from engine.model.weight_names import MoeWeightNames


def halves(interleaved: torch.Tensor) -> torch.Tensor:
    """[..., 2I] with gate at even and up at odd positions -> [..., 2I] as [gate | up]."""
    return torch.cat([interleaved[..., 0::2], interleaved[..., 1::2]], dim=-1)


def pack_layer(layout, blocks: torch.Tensor, gate_up: torch.Tensor, down: torch.Tensor) -> None:
    """gate_up [E, D, 2I] (interleaved), down [E, I, D] -> blocks [E, numel] of a DenseLayout."""
    for e in range(blocks.shape[0]):
        layout.pack(blocks[e], gate_up[e, :, 0::2].t(), gate_up[e, :, 1::2].t(), down[e].t())


def refuse_mxfp4(ckpt: Checkpoint, names: MoeWeightNames, layer: int) -> None:
    """A folder whose experts are MXFP4 blocks (gate_up_proj_blocks / _scales) while config.json does not say so
    (quantization_config): the MXFP4 path (engine.quant.mxfp4_checkpoint) reads only folders that do."""
    if not ckpt.has(names.fused_weight(layer, "gate_up_proj")) and ckpt.has(
            names.fused_weight(layer, "gate_up_proj_blocks")):
        raise UnsupportedModelError(f"{ckpt.folder}: gpt-oss experts in MXFP4 blocks, but config.json has no "
                                    "quantization_config with quant_method mxfp4; restore it, or use the "
                                    "checkpoint's bf16 form")


def load_expert_biases(ckpt: Checkpoint, args: ModelArgs, names: MoeWeightNames, moe_layers: list[int],
                       dtype: torch.dtype, device) -> dict[int, ExpertBias]:
    """{layer: ExpertBias} on the compute device, in the compute dtype."""
    E, D, I = args.num_experts, args.hidden_size, args.moe_intermediate_size
    if not args.experts.quant:
        refuse_mxfp4(ckpt, names, moe_layers[0])  # before the experts' host memory is sized for bf16
    biases = {}
    for layer in moe_layers:
        gate_up = ckpt.get(names.fused_weight(layer, "gate_up_proj_bias"), (E, 2 * I))
        down = ckpt.get(names.fused_weight(layer, "down_proj_bias"), (E, D))
        biases[layer] = ExpertBias(gate_up=halves(gate_up).to(device=device, dtype=dtype),
                                   down=down.to(device=device, dtype=dtype))
    return biases


def load_experts(store: ExpertStore, args: ModelArgs, ckpt: Checkpoint, names: MoeWeightNames,
                 progress: Progress | None) -> None:
    """Each expert packed from the mmapped checkpoint into its block: gate and up [I, D], down [D, I]."""
    E, D, I = args.num_experts, args.hidden_size, args.moe_intermediate_size
    for done, (layer, blocks) in enumerate(store.blocks.items()):
        gate_up = ckpt.get(names.fused_weight(layer, "gate_up_proj"), (E, D, 2 * I))
        down = ckpt.get(names.fused_weight(layer, "down_proj"), (E, I, D))
        pack_layer(store.layout, blocks, gate_up, down)
        if progress:
            progress((done + 1) / len(store.blocks), f"experts of layer {layer}")
