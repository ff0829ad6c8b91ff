"""TensorSpec: one tensor `wisp convert-gguf` writes (engine.gguf.convert), as the shared tensor map
(engine.gguf.tensor_map) and a family's own GGUF writing (GgufFormat.expert_specs) describe it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

Load = Callable[[], np.ndarray]
EXPERTS = {"gate": "ffn_gate_exps", "up": "ffn_up_exps", "down": "ffn_down_exps"}  # stacked [E, out, in]
GATE_UP = "ffn_gate_up_exps"  # gate and up of every expert in one [E, 2I, D] (gate rows first), where files fuse them


@dataclass(frozen=True)
class TensorSpec:
    """One GGUF tensor: its name, torch-order shape, and how to read it as f32 from the checkpoint."""

    name: str
    shape: tuple[int, ...]
    load: Load
    keep_f32: bool = False  # routers, norms, biases
    raw_type: int | None = None  # load() gives blocks of this ggml type, written as they are (MXFP4 experts)


def as_f32(tensor) -> np.ndarray:
    """A checkpoint's torch tensor as a float32 numpy array."""
    return tensor.float().numpy()


def stacked_experts(args, ckpt, names, layer: int, projection: str) -> np.ndarray:
    """One projection of every expert of a layer: [E, I, D] (gate, up) or [E, D, I] (down)."""
    E, D, I = args.num_experts, args.hidden_size, args.moe_intermediate_size
    if ckpt.has(names.fused_weight(layer, "gate_up_proj")):
        if projection == "down":
            return as_f32(ckpt.get(names.fused_weight(layer, "down_proj"), (E, D, I)))
        gate_up = ckpt.get(names.fused_weight(layer, "gate_up_proj"), (E, 2 * I, D))
        return as_f32(gate_up[:, :I] if projection == "gate" else gate_up[:, I:])
    hf_projection = {"gate": names.gate, "up": names.up, "down": names.down}[projection]
    shape = (D, I) if projection == "down" else (I, D)
    return np.stack([as_f32(ckpt.get(names.expert_weight(layer, e, hf_projection), shape)) for e in range(E)])
