"""Dense (non-expert) GGUF tensors expanded by Wisp's own dequantization: the Triton kernel on CUDA (the bytes go
to the device once, quantized), the torch reference on the CPU. Fits engine.gguf.weights.load_gguf_weights's
`dequantize` hook."""

from __future__ import annotations

import math

import numpy as np
import torch

from engine.errors import ModelFormatError
from engine.quant.linear import QuantLinearSpec, dequantize
from engine.quant.types import quant_type


def dequantize_dense(tensor, dtype: torch.dtype, device: torch.device | str = "cpu") -> torch.Tensor:
    """engine.gguf.tensors.DenseTensor (raw blocks of a `shape` tensor) -> a dense `shape` tensor of dtype."""
    shape = tuple(tensor.shape)
    columns = shape[-1] if shape else 1
    spec = QuantLinearSpec(quant_type(tensor.qtype), math.prod(shape[:-1]), columns)
    raw = torch.from_numpy(np.array(tensor.raw, dtype=np.uint8, copy=True).reshape(-1))  # a copy, never the mapping
    if raw.numel() != spec.nbytes:
        raise ModelFormatError(f"{tensor.name}: {raw.numel()} bytes, a {spec.qtype.name} tensor of shape {shape} is "
                               f"{spec.nbytes}")
    return dequantize(raw.to(device), spec, dtype).view(shape)
