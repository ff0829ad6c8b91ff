"""The decode GEMV over GGUF blocks: word-wide loads of the quant blocks, the values unpacked in registers, several
rows per program (engine.quant.linear.quant_gemv and gathered_gemv run it for Q4_K, Q5_K, Q6_K and Q8_0).

Shape legend:
    E   entries of a gathered GEMV: (token, k) pairs, each with its own expert slot
    N   output features of a matrix (rows), K input features (columns)
    BN  matrix rows per program
    a tile: one 256-element super-block of each of the BN rows (eight Q8_0 blocks), as [BN, A, W, J]: J values
        of one 16- or 32-bit word of the block, W words in a run, A runs; each type's function says which
        element each position holds

Each (entry, BN rows) program reduces its rows over K alone in one fixed order (tile by tile into a register
tile, then one tl.sum), so an entry's bits never depend on the other entries of the launch or on the provider
that placed its slot. A quant value becomes a float without a conversion instruction: its bits or'ed into
2^23's exponent, minus 2^23 (exact for integers below 2^23). Q4_K and Q5_K blocks (144 and 176 bytes) are
read in 32-bit words; Q6_K and Q8_0 blocks (210 and 34 bytes, rows 2-byte aligned) in 16-bit ones."""

from __future__ import annotations

import triton
import triton.language as tl

from engine.quant.triton_kernels import k4_scales, rounded, store_as

MAGIC = tl.constexpr(0x4B000000)  # the bits of 2^23 as float32: MAGIC | q is 2^23 + q for 0 <= q < 2^23
WORD_TYPES = {"Q8_0": 3, "Q4_K": 4, "Q5_K": 5, "Q6_K": 6}  # engine.quant.triton_kernels.TYPE_CODE's codes


@triton.jit
def small_int(q, bias: tl.constexpr):
    """int32 0 <= q < 2^23 -> float32 q - bias, exact."""
    return (q | MAGIC).to(tl.float32, bitcast=True) - (8388608.0 + bias)


@triton.jit
def f16_of(half):
    """int32 holding f16 bits in its low half -> float32."""
    return (half & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def words(ptr, ok):
    return tl.load(ptr.to(tl.pointer_type(tl.int32)), mask=ok, other=0)


@triton.jit
def halves(ptr, ok):
    return tl.load(ptr.to(tl.pointer_type(tl.uint16)), mask=ok, other=0).to(tl.int32)


@triton.jit
def x_at(x_row, e, ok):
    return tl.load(x_row + e, mask=ok, other=0.0).to(tl.float32)


@triton.jit
def q4k_dot(row, row_ok, x_row, K, BN: tl.constexpr, Q5: tl.constexpr):
    """Q4_K (Q5: Q5_K) rows at byte pointers row [BN, 1, 1, 1] times x -> [BN] float32. Tile [BN, 4, 8, 4]: run c
    holds sub-blocks 2c (low nibbles) and 2c + 1 (high) of bytes 32c + 4w + j, elements 64c + 4w + j and + 32."""
    c = tl.arange(0, 4)[None, :, None, None]
    w = tl.arange(0, 8)[None, None, :, None]
    j = tl.arange(0, 4)[None, None, None, :]
    e = c * 64 + w * 4 + j  # [1, 4, 8, 4]
    acc = tl.zeros([BN, 4, 8, 4], dtype=tl.float32)
    for t in range(0, K // 256):
        bb = row + t * (176 if Q5 else 144)
        dd = words(bb, row_ok)  # d | dmin << 16
        d = f16_of(dd)
        dmin = f16_of(dd >> 16)
        sc_lo, mn_lo = k4_scales(bb, 2 * c, row_ok)  # [BN, 4, 1, 1]
        sc_hi, mn_hi = k4_scales(bb, 2 * c + 1, row_ok)
        qs = words(bb + (48 if Q5 else 16) + c * 32 + w * 4, row_ok)  # [BN, 4, 8, 1]
        lo = (qs >> (j * 8)) & 15
        hi = (qs >> (j * 8 + 4)) & 15
        if Q5:
            qh = words(bb + 16 + w * 4, row_ok)  # [BN, 1, 8, 1]: bit g of byte l is element 32g + l's fifth bit
            lo = lo | (((qh >> (j * 8 + 2 * c)) & 1) << 4)
            hi = hi | (((qh >> (j * 8 + 2 * c + 1)) & 1) << 4)
        x_lo = x_at(x_row, t * 256 + e, e >= 0)
        x_hi = x_at(x_row, t * 256 + 32 + e, e >= 0)
        v_lo = (d * sc_lo) * small_int(lo, 0.0) - dmin * mn_lo
        v_hi = (d * sc_hi) * small_int(hi, 0.0) - dmin * mn_hi
        acc += v_lo * x_lo + v_hi * x_hi
    return tl.sum(tl.sum(tl.sum(acc, axis=3), axis=2), axis=1)


@triton.jit
def q6k_dot(row, row_ok, x_row, K, BN: tl.constexpr):
    """Q6_K rows times x -> [BN]. Tile [BN, 4, 8, 2] per quarter s: run a = 2h + u is half h, lanes 16u + 2w + j;
    element h * 128 + 32 s + 16 u + 2 w + j takes the nibble of ql byte 64h + 32 (s % 2) + lane (high if s >= 2)
    and bits 2s of qh byte 32h + lane; its scale is byte 8h + 2s + u."""
    a = tl.arange(0, 4)[None, :, None, None]
    w = tl.arange(0, 8)[None, None, :, None]
    j = tl.arange(0, 2)[None, None, None, :]
    h = a // 2
    lane = (a % 2) * 16 + w * 2  # [1, 4, 8, 1], even
    e = h * 128 + lane + j  # element of quarter 0
    acc = tl.zeros([BN, 4, 8, 2], dtype=tl.float32)
    for t in range(0, K // 256):
        bb = row + t * 210
        d = f16_of(halves(bb + 208, row_ok))  # [BN, 1, 1, 1]
        ql_even = halves(bb + h * 64 + lane, row_ok)
        ql_odd = halves(bb + h * 64 + 32 + lane, row_ok)
        qh = halves(bb + 128 + h * 32 + lane, row_ok)
        for s in tl.static_range(4):
            ql = ql_even if s % 2 == 0 else ql_odd
            q = ((ql >> (j * 8 + (s // 2) * 4)) & 15) | (((qh >> (j * 8 + 2 * s)) & 3) << 4)
            scale = tl.load((bb + 192 + h * 8 + 2 * s + a % 2).to(tl.pointer_type(tl.int8)), mask=row_ok, other=0)
            xv = x_at(x_row, t * 256 + s * 32 + e, e >= 0)
            acc += ((d * scale.to(tl.float32)) * small_int(q, 32.0)) * xv
    return tl.sum(tl.sum(tl.sum(acc, axis=3), axis=2), axis=1)


@triton.jit
def q8_0_dot(row, row_ok, x_row, K, BN: tl.constexpr):
    """Q8_0 rows times x -> [BN]. Tile [BN, 8, 16, 2]: block b of the eight, int8 2w + j of its 32."""
    b = tl.arange(0, 8)[None, :, None, None]
    w = tl.arange(0, 16)[None, None, :, None]
    j = tl.arange(0, 2)[None, None, None, :]
    e = b * 32 + w * 2 + j
    acc = tl.zeros([BN, 8, 16, 2], dtype=tl.float32)
    for t in range(0, tl.cdiv(K, 256)):
        bb = row + (t * 8 + b) * 34  # [BN, 8, 1, 1]
        ok = row_ok & ((t * 8 + b) * 32 < K)
        d = f16_of(halves(bb, ok))
        q = ((halves(bb + 2 + w * 2, ok) >> (j * 8)) & 255) ^ 128  # the int8 plus 128
        xv = x_at(x_row, t * 256 + e, t * 256 + e < K)
        acc += (small_int(q, 128.0) * d) * xv
    return tl.sum(tl.sum(tl.sum(acc, axis=3), axis=2), axis=1)


@triton.jit
def rows_dot(row, row_ok, x_row, K, QTYPE: tl.constexpr, BN: tl.constexpr):
    if QTYPE == 3:
        return q8_0_dot(row, row_ok, x_row, K, BN)
    elif QTYPE == 6:
        return q6k_dot(row, row_ok, x_row, K, BN)
    else:
        return q4k_dot(row, row_ok, x_row, K, BN, QTYPE == 5)


@triton.jit
def word_gemv(x_ptr, table_ptr, rows_ptr, scale_ptr, out_ptr, slot_bytes, offset, row_bytes, N, K, x_stride, x_div,
              QTYPE: tl.constexpr, BN: tl.constexpr, SWIGLU: tl.constexpr, SCALE: tl.constexpr):
    """out[i, n] = sum_k W_i[n, k] * x[i // x_div, k] rounded to out's dtype, W_i the matrix at byte `offset` of
    slot rows[i]. SWIGLU: W_i is [gate; up] (2N rows) and out[i, n] = silu(gate_n) * up_n, each step rounded to
    out's dtype as torch's ops would. SCALE: out[i] is then multiplied by scale[i] and rounded again."""
    i = tl.program_id(0)
    n = tl.program_id(1) * BN + tl.arange(0, BN)
    slot = tl.load(rows_ptr + i).to(tl.int64)
    row = table_ptr + slot * slot_bytes + offset + n.to(tl.int64)[:, None, None, None] * row_bytes
    row_ok = (n < N)[:, None, None, None]
    x_row = x_ptr + (i // x_div).to(tl.int64) * x_stride
    dtype = out_ptr.dtype.element_ty
    y = rounded(rows_dot(row, row_ok, x_row, K, QTYPE, BN), dtype)
    if SWIGLU:
        up = rounded(rows_dot(row + N.to(tl.int64) * row_bytes, row_ok, x_row, K, QTYPE, BN), dtype)
        y = rounded(rounded(y / (1.0 + tl.exp(-y)), dtype) * up, dtype)
    if SCALE:
        y = y * tl.load(scale_ptr + i).to(tl.float32)
    store_as(out_ptr + i.to(tl.int64) * N + n, y, n < N)
