"""A safetensors checkpoint's dense weights quantized at load (EngineOptions.dense_quant, `--dense-quant q8_0`):
the linear layers and the token embedding that a llama.cpp file of that type stores quantized
(engine.quant.dense_file_types: attention, shared experts, dense MLPs, lm_head, the embedding; not the routers,
norms, one-row gates, or a matrix whose rows are not whole blocks) become engine.quant.dense's QuantLinear /
QuantEmbedding, so they run on the same kernels as a GGUF file's. The blocks come from the gguf package's
quantizer (llama.cpp's reference rounding, in numpy) on the host, a slice of rows at a time; only the blocks go to
the device. The outputs change by the type's rounding of the weights."""

from __future__ import annotations

import numpy as np
import torch

from engine.errors import ModelFormatError
from engine.quant.dense import dense_spec
from engine.quant.linear import QuantLinearSpec

TYPE_NAMES = {"q8_0": "Q8_0"}  # EngineOptions.dense_quant -> the quant type its blocks hold
CHUNK_VALUES = 2**24  # at most this many weights are quantized at once (the quantizer's float32 temporaries)


def quantized_types(model, args, dense_quant: str) -> dict[str, str]:
    """{Wisp parameter: type name} of the weights of `model` (a tree of `args`) that dense_quant quantizes."""
    from engine.quant.dense_file_types import dense_types

    return dense_types(TYPE_NAMES[dense_quant], model, args)


def quantize_rows(weight: torch.Tensor, type_name: str) -> np.ndarray:
    """A [rows, columns] float tensor (host) -> its blocks, uint8 [rows, row bytes], by the gguf package."""
    from gguf import GGMLQuantizationType, quants

    qtype = GGMLQuantizationType[type_name]
    step = max(1, CHUNK_VALUES // weight.shape[1])
    parts = [quants.quantize(weight[start : start + step].to(torch.float32).numpy(), qtype)
             for start in range(0, weight.shape[0], step)]
    return np.concatenate(parts)


def quantize_weight(weight: torch.Tensor, type_name: str,
                    device: torch.device | str) -> tuple[torch.Tensor, QuantLinearSpec]:
    """A checkpoint's [out, in] weight (on the host) -> (its blocks, uint8 [nbytes] on device; spec)."""
    spec = dense_spec(type_name, tuple(weight.shape))
    rows = weight.detach().reshape(-1, weight.shape[-1]).cpu()
    raw = torch.from_numpy(quantize_rows(rows, type_name).reshape(-1))
    if raw.numel() != spec.nbytes:
        raise ModelFormatError(f"a {type_name} matrix of shape {tuple(weight.shape)} is {spec.nbytes} bytes, "
                               f"the quantizer gave {raw.numel()}")
    return raw.to(device), spec
