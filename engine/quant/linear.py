"""Quantized matrices: where one lives in a byte buffer (QuantLinearSpec) and the two ways to compute with it,
dequantize to a dtype or a gathered GEMV. On CUDA they run the Triton kernels (engine.quant.triton_kernels), on
the CPU the torch reference (engine.quant.reference) and the same math; the device alone decides."""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from engine.quant.reference import dequantize_reference
from engine.quant.types import QuantType, quant_type
from engine.system.triton_support import HAS_TRITON

# Which decode GEMV runs where it can: "wide" (engine.quant.wide_gemv for Q4_K and Q6_K, the word kernel for Q8_0),
# "word" (engine.quant.gemv_kernels where word_split picks it) or "byte" (engine.quant.triton_kernels everywhere).
# "wide" is the engine's; the other two are a bench's parameter (bench/profile_decode.py --gemv) to compare with.
GEMV = "wide"
# A bench's override of wide_split's choice, {"type:in_features": (BN, SB, warps) or None: not the wide kernel}
WIDE_SPLITS: dict[str, tuple[int, int, int] | None] = {}

MAX_GRID_ROWS = 65535  # CUDA's limit on a grid's second axis, where the GEMVs put the matrix's row blocks
ROWS_PER_PROGRAM = 16  # matrix rows per GEMV program: one fixed split, so every entry reduces the same way


@dataclass(frozen=True)
class QuantLinearSpec:
    """A [out_features, in_features] matrix of qtype blocks starting at byte_offset of a buffer (a slot row)."""

    qtype: QuantType
    out_features: int
    in_features: int
    byte_offset: int = 0

    def __post_init__(self):
        object.__setattr__(self, "qtype", quant_type(self.qtype))
        self.qtype.row_bytes(self.in_features)  # refuses a row that is not whole blocks

    @property
    def row_bytes(self) -> int:
        return self.qtype.row_bytes(self.in_features)

    @property
    def nbytes(self) -> int:
        return self.out_features * self.row_bytes

    @property
    def end(self) -> int:
        return self.byte_offset + self.nbytes

    def raw(self, buffer: torch.Tensor) -> torch.Tensor:
        """This matrix's bytes in a 1-D uint8 buffer -> [out_features, row_bytes]."""
        return buffer[self.byte_offset : self.end].view(self.out_features, self.row_bytes)


def uses_triton(device: torch.device) -> bool:
    return HAS_TRITON and device.type == "cuda"


def dequantize(buffer: torch.Tensor, spec: QuantLinearSpec, dtype: torch.dtype) -> torch.Tensor:
    """The matrix spec describes in the 1-D uint8 buffer -> [out_features, in_features] of dtype."""
    if uses_triton(buffer.device):
        return dequantize_triton(buffer, spec, dtype)
    return dequantize_reference(spec.raw(buffer), spec.qtype).to(dtype)


def dequantize_rows(buffer: torch.Tensor, spec: QuantLinearSpec, ids: torch.Tensor, dtype: torch.dtype):
    """Rows ids [n] of the matrix spec describes (an embedding lookup) -> [n, in_features] of dtype. The rows'
    blocks are gathered first, so only they are dequantized."""
    picked = spec.raw(buffer)[ids.reshape(-1)].reshape(-1)  # [n * row_bytes], contiguous
    rows = QuantLinearSpec(spec.qtype, ids.numel(), spec.in_features)
    return dequantize(picked, rows, dtype).view(*ids.shape, spec.in_features)


def gathered_gemv(x: torch.Tensor, table: torch.Tensor, rows: torch.Tensor, spec: QuantLinearSpec,
                  glu: bool = False, x_div: int = 1) -> torch.Tensor:
    """Entry i multiplies the matrix at spec's offset of slot table[rows[i]] by x[i // x_div] -> [E, out] in
    x.dtype (fp32 accumulation). table uint8 [num_slots, slot_bytes], rows [E]. glu: x rows are [gate | up]
    (2 * in_features) and the input is silu(gate) * up in x.dtype."""
    if x.shape[-1] != spec.in_features * (2 if glu else 1):
        raise ValueError(f"x has {x.shape[-1]} features, the {spec.qtype.name} matrix takes {spec.in_features}"
                         + (" (twice: gate and up)" if glu else ""))
    if uses_triton(x.device):
        if runs_wide(x.device, spec, table) and not glu:
            return wide_gemv_triton(x, table, rows, spec, x_div)
        if runs_words(x.device, spec) and not glu:
            return word_gemv_triton(x, table, rows, spec, x_div)
        return gathered_gemv_triton(x, table, rows, spec, glu, x_div)
    return gathered_gemv_reference(x, table, rows, spec, glu, x_div)


def gathered_swiglu(x: torch.Tensor, table: torch.Tensor, rows: torch.Tensor, gate_up: QuantLinearSpec,
                    x_div: int = 1) -> torch.Tensor:
    """silu(gate) * up of entry i's [gate; up] matrix (gate_up: 2I rows) times x[i // x_div] -> [E, I] in x.dtype,
    each step rounded to x.dtype as glu_input(gathered_gemv(...)) rounds: one launch where runs_words."""
    if runs_wide(x.device, gate_up, table):
        return wide_gemv_triton(x, table, rows, gate_up, x_div, swiglu=True)
    if runs_words(x.device, gate_up):
        return word_gemv_triton(x, table, rows, gate_up, x_div, swiglu=True)
    return glu_input(gathered_gemv(x, table, rows, gate_up, x_div=x_div))


def scaled_gemv(x: torch.Tensor, table: torch.Tensor, rows: torch.Tensor, spec: QuantLinearSpec,
                scale: torch.Tensor) -> torch.Tensor:
    """(gathered_gemv(x, table, rows, spec) * scale[:, None]).to(x.dtype): scale [E] multiplies entry i's output
    (a routing weight), in the kernel's epilogue where runs_words."""
    if runs_wide(x.device, spec, table):
        return wide_gemv_triton(x, table, rows, spec, scale=scale.reshape(-1))
    if runs_words(x.device, spec):
        return word_gemv_triton(x, table, rows, spec, scale=scale.reshape(-1))
    return (gathered_gemv(x, table, rows, spec) * scale.reshape(-1, 1)).to(x.dtype)


def quant_gemv(x: torch.Tensor, buffer: torch.Tensor, spec: QuantLinearSpec) -> torch.Tensor:
    """x [T, in] times the matrix spec describes in the 1-D uint8 buffer -> [T, out] in x.dtype (a dense layer's
    decode step; the same kernel as gathered_gemv with every entry on one slot)."""
    rows = torch.zeros(x.shape[0], dtype=torch.int64, device=x.device)
    return gathered_gemv(x, buffer.view(1, -1), rows, spec)


def gathered_gemv_reference(x, table, rows, spec: QuantLinearSpec, glu: bool = False, x_div: int = 1):
    """The CPU path: each entry one fp32 matrix-vector product of the same shape, so no entry's bits depend on the
    others. Each distinct slot is dequantized once."""
    inputs = glu_input(x) if glu else x
    slots, which = torch.unique(rows, return_inverse=True)
    weights = [dequantize_reference(spec.raw(table[int(s)]), spec.qtype) for s in slots]  # [out, in] fp32 each
    out = torch.empty(rows.numel(), spec.out_features, dtype=x.dtype, device=x.device)
    for i, w in enumerate(which.tolist()):
        out[i] = torch.mv(weights[w], inputs[i // x_div].float()).to(x.dtype)
    return out


def glu_input(gate_up: torch.Tensor) -> torch.Tensor:
    """[*, 2I] holding gate | up -> silu(gate) * up [*, I] in gate_up's dtype (kernel.gathered_experts' math)."""
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up


def dequantize_triton(buffer: torch.Tensor, spec: QuantLinearSpec, dtype: torch.dtype) -> torch.Tensor:
    """The Triton kernel on buffer's device (the CPU only under TRITON_INTERPRET=1)."""
    from engine.quant.triton_kernels import TILE, TYPE_CODE, tile_shape
    from engine.quant.triton_kernels import dequantize as dequantize_kernel

    out = torch.empty(spec.out_features, spec.in_features, dtype=dtype, device=buffer.device)
    group, lanes = tile_shape(spec.qtype)
    grid = (_cdiv(spec.out_features, ROWS_PER_PROGRAM), _cdiv(spec.in_features, TILE))
    dequantize_kernel[grid](spec.raw(buffer), out, spec.out_features, spec.in_features, spec.row_bytes,
                            QTYPE=TYPE_CODE[spec.qtype], BN=ROWS_PER_PROGRAM, G=group, L=lanes, num_warps=4,
                            enable_fp_fusion=False)
    return out


def gathered_gemv_triton(x, table, rows, spec: QuantLinearSpec, glu: bool = False, x_div: int = 1,
                         rows_per_program: int = ROWS_PER_PROGRAM, num_warps: int = 4) -> torch.Tensor:
    """The Triton GEMV on x's device (the CPU only under TRITON_INTERPRET=1); the split is fixed by the matrix
    shape alone (benchmarks may try others)."""
    from engine.quant.triton_kernels import TYPE_CODE, tile_shape
    from engine.quant.triton_kernels import gathered_gemv as gathered_gemv_kernel

    x = x.contiguous()
    out = torch.empty(rows.numel(), spec.out_features, dtype=x.dtype, device=x.device)
    group, lanes = tile_shape(spec.qtype)
    grid = (rows.numel(), _cdiv(spec.out_features, rows_per_program))
    gathered_gemv_kernel[grid](x, table, rows, out, table.shape[1], spec.byte_offset, spec.row_bytes,
                               spec.out_features, spec.in_features, x.shape[-1], x_div, QTYPE=TYPE_CODE[spec.qtype],
                               GLU=glu, BN=rows_per_program, G=group, L=lanes, num_warps=num_warps,
                               enable_fp_fusion=False)
    return out


def word_gemv_triton(x, table, rows, spec: QuantLinearSpec, x_div: int = 1, swiglu: bool = False,
                     scale: torch.Tensor | None = None, split: tuple[int, int, int] | None = None):
    """engine.quant.gemv_kernels.word_gemv on x's device (the CPU only under TRITON_INTERPRET=1). swiglu: spec is
    [gate; up], the output silu(gate) * up; scale [E]: entry i's output times scale[i]. split (rows per program,
    super-blocks per step, warps) is fixed by the matrix's type and shape (benchmarks may try others)."""
    from engine.quant.gemv_kernels import WORD_TYPES as CODES
    from engine.quant.gemv_kernels import word_gemv

    x = x.contiguous()
    n_out = spec.out_features // 2 if swiglu else spec.out_features
    out = torch.empty(rows.numel(), n_out, dtype=x.dtype, device=x.device)
    block, supers, warps = split or any_word_split(spec)
    grid = (rows.numel(), _cdiv(n_out, block))
    word_gemv[grid](x, table, rows, out if scale is None else scale, out, table.shape[1], spec.byte_offset,
                    spec.row_bytes, n_out, spec.in_features, x.shape[-1], x_div, QTYPE=CODES[spec.qtype.name],
                    BN=block, S=supers, SWIGLU=swiglu, SCALE=scale is not None, num_warps=warps)
    return out


def wide_gemv_triton(x, table, rows, spec: QuantLinearSpec, x_div: int = 1, swiglu: bool = False,
                     scale: torch.Tensor | None = None, split: tuple[int, int, int] | None = None):
    """engine.quant.wide_gemv.wide_gemv on x's device (the CPU only under TRITON_INTERPRET=1), as word_gemv_triton;
    the table's rows must start on 16-byte boundaries (runs_wide). x rows of 16-bit values are read 8 bytes at a
    time: a row that does not start on 8 bytes is copied first (the same values, so the same bits)."""
    from engine.quant.wide_gemv import WIDE_TYPES, wide_gemv

    x = x.contiguous()
    if x.element_size() == 2 and (x.data_ptr() % 8 or x.stride(0) % 4):
        x = x.clone()
    n_out = spec.out_features // 2 if swiglu else spec.out_features
    out = torch.empty(rows.numel(), n_out, dtype=x.dtype, device=x.device)
    block, supers, warps = split or wide_split(spec) or (4, 2, 1)
    grid = (rows.numel(), _cdiv(n_out, block // 2 if swiglu else block))
    wide_gemv[grid](x, table, rows, out if scale is None else scale, out, table.shape[1], spec.byte_offset,
                    spec.row_bytes, n_out, spec.in_features, x.shape[-1], x_div, QTYPE=WIDE_TYPES[spec.qtype.name],
                    BN=block, SB=supers, SWIGLU=swiglu, SCALE=scale is not None, num_warps=warps)
    return out


def word_split(spec: QuantLinearSpec) -> tuple[int, int, int] | None:
    """(rows per program, super-blocks per step, warps) of the word GEMV for this matrix, or None where the byte
    kernel (engine.quant.triton_kernels) serves: the word kernel runs where the H200 probe measured it at least as
    fast (bench/results/2026-12-02-decode-2/NOTES.md): Q4_K rows of 2048 or more (8 super-blocks a step), Q6_K and
    Q8_0 at one super-block a step. Q5_K and shorter Q4_K rows were not measured faster. GEMV "byte" keeps every
    matrix on the byte kernel, to compare."""
    if GEMV == "byte":
        return None
    name = spec.qtype.name
    if name == "Q4_K" and spec.in_features >= 2048:
        split = (2, 8, 1)
    else:
        split = {"Q6_K": (4, 1, 1), "Q8_0": (2, 1, 1)}.get(name)
    return split if split is not None and fits_grid(spec, split[0]) else None


def fits_grid(spec: QuantLinearSpec, rows_per_program: int) -> bool:
    """A GEMV of this matrix at rows_per_program launches at most MAX_GRID_ROWS programs along its rows (an lm_head
    of 151,936 rows at two a program would not; it runs a kernel with more rows a program)."""
    return _cdiv(spec.out_features, rows_per_program) <= MAX_GRID_ROWS


def runs_words(device: torch.device, spec: QuantLinearSpec) -> bool:
    """Whether the GEMV of this matrix runs a kernel with the SwiGLU and scale epilogues on this device
    (engine.quant.gemv_kernels or engine.quant.wide_gemv)."""
    return uses_triton(device) and (word_split(spec) is not None or wide_split(spec) is not None)


def wide_split(spec: QuantLinearSpec) -> tuple[int, int, int] | None:
    """(rows per program, super-blocks per step, warps) of engine.quant.wide_gemv for this matrix, or None where it
    does not serve. It serves Q4_K and Q6_K matrices at 16-byte-aligned offsets when GEMV is "wide": on the H200 it
    beat the word and byte kernels at Qwen3-30B-A3B's expert shapes, at two rows a program
    (bench/results/2026-12-02-decode-3/NOTES.md). Q5_K runs it only through WIDE_SPLITS (not measured). The
    split depends on the matrix alone, so every entry, batch and provider reduces the same way."""
    name = spec.qtype.name
    if GEMV != "wide" or not spec.qtype.wide_gemv or spec.byte_offset % 16:
        return None
    supers = 1 << (_cdiv(spec.in_features, 256) - 1).bit_length()  # super-blocks a row, to a power of two
    default = {"Q4_K": (2, min(8, max(2, supers)), 1), "Q6_K": (2, min(4, supers), 1)}.get(name)
    split = WIDE_SPLITS.get(f"{name}:{spec.in_features}", default)
    return split if split is not None and fits_grid(spec, split[0]) else None


def runs_wide(device: torch.device, spec: QuantLinearSpec, table: torch.Tensor) -> bool:
    """Whether the GEMV of this matrix in this table runs engine.quant.wide_gemv: wide_split serves it and the
    table's rows start on 16-byte boundaries (a property of the table, not of the call)."""
    return (uses_triton(device) and wide_split(spec) is not None and table.data_ptr() % 16 == 0
            and (table.shape[0] == 1 or table.stride(0) * table.element_size() % 16 == 0))


def any_word_split(spec: QuantLinearSpec) -> tuple[int, int, int]:
    """word_split, or for a word type it does not pick: two rows a program, up to 8 super-blocks a step."""
    supers = 1 << min(3, (_cdiv(spec.in_features, 256) - 1).bit_length())
    return word_split(spec) or (2, supers, 1)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)
