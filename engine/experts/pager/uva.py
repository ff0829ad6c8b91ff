"""Device-side views of pinned host memory (unified virtual addressing): a kernel reading such a view pulls
the bytes it touches over the PCIe link, with no copy issued by the host."""

from __future__ import annotations

import torch

_TYPESTR = {torch.int32: "<i4", torch.int16: "<i2", torch.uint8: "|u1"}


class _Interface:
    def __init__(self, tensor: torch.Tensor):
        self.__cuda_array_interface__ = {"shape": tuple(tensor.shape), "typestr": _TYPESTR[tensor.dtype],
                                         "data": (tensor.data_ptr(), False), "version": 3, "strides": None}


def word_dtype(nbytes: int) -> torch.dtype:
    """The widest integer word that tiles a row of nbytes."""
    return torch.int32 if nbytes % 4 == 0 else torch.int16 if nbytes % 2 == 0 else torch.uint8


def as_words(tensor: torch.Tensor) -> torch.Tensor:
    """A 2-D contiguous tensor viewed as rows of integer words (copies move bits, never values)."""
    return tensor.view(torch.uint8).view(word_dtype(tensor.shape[1] * tensor.element_size()))


def device_view(host: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A CUDA tensor aliasing the pinned 2-D host tensor `host` (viewed as words). Keep `host` alive.
    On the CPU (Triton's interpreter) the host tensor itself."""
    if device.type != "cuda":
        return as_words(host)
    if not host.is_pinned():
        raise ValueError("only pinned host memory can be read in place by the GPU")
    words = as_words(host)
    with torch.cuda.device(device):
        view = torch.as_tensor(_Interface(words), device=device)
    return view
