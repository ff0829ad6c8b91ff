"""The expert biases of a GGUF file (ffn_{gate,up,down}_exps.bias: gpt-oss), loaded resident for Wisp's engine."""

from __future__ import annotations

import torch

from engine.experts.formats.activation import ExpertBias
from engine.gguf.tensor_map import expert_bias_names


def expert_biases(model, dtype: torch.dtype, device) -> dict[int, ExpertBias]:
    """{MoE layer: ExpertBias} from the file's exps biases, on the compute device in the compute dtype; gate_up is
    [gate | up] as the slot's gate_up rows."""
    biases = {}
    for layer, is_moe in enumerate(model.args.moe_layers):
        if not is_moe:
            continue
        tensors = {p: model.dense_tensor(name) for p, name in expert_bias_names(layer).items()}
        gate, up, down = (tensors[p].dequantize(torch.float32) for p in ("gate", "up", "down"))
        biases[layer] = ExpertBias(gate_up=torch.cat([gate, up], dim=-1).to(device=device, dtype=dtype),
                                   down=down.to(device=device, dtype=dtype))
    return biases
