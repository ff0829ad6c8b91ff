"""Random valid GGUF blocks for the quant tests: random bytes whose f16 fields (scales, or the values of F16/BF16/
F32 tensors) are finite, so every bit pattern of the quantized payload is exercised. MXFP4's E8M0 scale is any
byte at the full range, and a byte of the same magnitude as an f16 scale's cap otherwise."""

from __future__ import annotations

import numpy as np

from engine.quant.types import BF16, F16, F32, MXFP4, SUPPORTED, QuantType

ALL_TYPES = SUPPORTED


def finite_f16_bits(rng: np.random.Generator, shape, max_exponent: int = 30) -> np.ndarray:
    """Random f16 bit patterns with exponent <= max_exponent (30 = every finite value, subnormals included)."""
    bits = rng.integers(0, 1 << 16, size=shape, dtype=np.uint16)
    exponent = (bits >> 10) & 0x1F
    capped = np.minimum(exponent, max_exponent).astype(np.uint16)
    return (bits & ~np.uint16(0x7C00)) | (capped << 10)


def random_rows(qtype: QuantType, rows: int, cols: int, seed: int = 0, max_exponent: int = 30) -> np.ndarray:
    """uint8 [rows, row_bytes] of valid random blocks for a [rows, cols] tensor of qtype."""
    rng = np.random.default_rng(seed)
    if qtype in (F16, BF16):
        exponent = max_exponent if qtype is F16 else None
        bits = finite_f16_bits(rng, (rows, cols), exponent) if qtype is F16 else _finite_bf16_bits(rng, (rows, cols))
        return bits.view(np.uint8).reshape(rows, -1)
    if qtype is F32:
        return rng.standard_normal((rows, cols), dtype=np.float32).view(np.uint8).reshape(rows, -1)
    blocks = rng.integers(0, 256, size=(rows * cols // qtype.block_size, qtype.block_bytes), dtype=np.uint8)
    for offset in qtype.f16_scale_offsets:
        field = finite_f16_bits(rng, blocks.shape[0], max_exponent)
        blocks[:, offset : offset + 2] = field.view(np.uint8).reshape(-1, 2)
    if qtype is MXFP4 and max_exponent < 30:
        top = max_exponent + 112  # 2^(e - 127) at most the f16 cap's 2^(max_exponent - 15)
        blocks[:, 0] = rng.integers(top - 10, top + 1, size=blocks.shape[0])
    return blocks.reshape(rows, -1)


def _finite_bf16_bits(rng, shape) -> np.ndarray:
    bits = rng.integers(0, 1 << 16, size=shape, dtype=np.uint16)
    exponent = (bits >> 7) & 0xFF
    return (bits & ~np.uint16(0x7F80)) | (np.minimum(exponent, 254).astype(np.uint16) << 7)


def gguf_type(qtype: QuantType):
    from gguf import GGMLQuantizationType

    return GGMLQuantizationType(qtype.ggml_id)


def random_matrix(qtype: QuantType, rows: int, cols: int, seed: int = 0) -> np.ndarray:
    """uint8 [rows, row_bytes] of a matrix with values of a usable size (|w| mostly below ~10)."""
    if qtype in (F32, F16, BF16):
        import torch

        values = torch.from_numpy(np.random.default_rng(seed).standard_normal((rows, cols), dtype=np.float32))
        dtype = {F32: torch.float32, F16: torch.float16, BF16: torch.bfloat16}[qtype]
        return values.to(dtype).view(torch.uint8).numpy().reshape(rows, -1)
    return random_rows(qtype, rows, cols, seed=seed, max_exponent=9)


def random_experts(layout, num_experts: int, seed: int = 0):
    """uint8 [num_experts, slot_bytes] slot table of random experts for a QuantExpertFormat, and their raw parts."""
    import torch

    parts = [tuple(random_matrix(spec.qtype, spec.out_features, spec.in_features, seed=seed * 1000 + 3 * e + j)
                   for j, spec in enumerate((layout.gate, layout.up, layout.down))) for e in range(num_experts)]
    return torch.stack([layout.pack(*p) for p in parts]), parts


def ggml_quantized(qtype: QuantType, weights: np.ndarray) -> np.ndarray:
    """uint8 [rows, row_bytes]: float32 weights [rows, cols] quantized by llama.cpp's own ggml_quantize_chunk (the
    library llama-cpp-python ships), for the types the gguf package cannot quantize."""
    import ctypes
    from pathlib import Path

    import llama_cpp

    ggml = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
    ggml.ggml_quantize_chunk.restype = ctypes.c_size_t
    ggml.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                         ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    weights = np.ascontiguousarray(weights, dtype=np.float32)
    rows, cols = weights.shape
    out = np.zeros((rows, qtype.row_bytes(cols)), dtype=np.uint8)
    written = ggml.ggml_quantize_chunk(qtype.ggml_id, weights.ctypes.data, out.ctypes.data, 0, rows, cols, None)
    assert written == out.nbytes, (written, out.nbytes)
    return out
