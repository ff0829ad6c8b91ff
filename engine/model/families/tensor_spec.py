"""TensorSpec: one tensor `wisp convert-gguf` writes (engine.gguf.convert), as the shared tensor map
(engine.gguf.tensor_map) and a family's own GGUF writing (GgufFormat.expert_specs) describe it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

Load = Callable[[], np.ndarray]


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
