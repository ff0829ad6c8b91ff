"""The decode GEMV for block types (Q8_0, Q4_K, Q5_K, Q6_K): quantized ints times x, scaled once per sub-block.

Shape legend:
    E   entries of the gathered GEMV: (token, k) pairs, each with its own expert slot
    N   output features (matrix rows), K input features; BN rows per program
    Q4_K/Q5_K tile [BN, 4, 8]: 64-element chunk c, 32-bit word w of the chunk's 32 nibble bytes; word w's byte i
        holds element 64c + 4w + i (low nibble, sub-block 2c) and 64c + 32 + 4w + i (high nibble, sub-block 2c + 1)
    Q6_K tile [BN, 8, 8]: 16-bit word 8a + b of the 128 low-nibble bytes; Q8_0 tile [BN, 8, 16]: block g of 8,
        16-bit word p of its 32 int8 values

Each thread sums q * x over the few elements of a word that share a scale, then scales that sum: about four
instructions an element, where dequantizing every weight first (engine.quant.triton_kernels) takes about ten and
made the GEMV instruction-bound. So the sums are not the reference's dequantized dot products bit for bit (they
agree to fp32 rounding). Each (entry, BN rows) program accumulates its rows tile by tile in one fixed order and
reduces once at the end, so a result never depends on the other entries of the launch."""

from __future__ import annotations

import triton
import triton.language as tl

from engine.quant.triton_kernels import f16_at, k4_scales, rounded, store_as


@triton.jit
def x_at(x_row, k, K, GLU: tl.constexpr):
    """Input element(s) k of an entry as float32: x, or silu(gate) * up rounded as the reference rounds it."""
    if GLU:
        gate = tl.load(x_row + k).to(tl.float32)
        up = tl.load(x_row + K + k).to(tl.float32)
        act = rounded(gate / (1.0 + tl.exp(-gate)), x_row.dtype.element_ty)
        return rounded(act * up, x_row.dtype.element_ty)
    else:
        return tl.load(x_row + k).to(tl.float32)


@triton.jit
def k4_rows(row, row_ok, x_row, K, FIVE_BITS: tl.constexpr, GLU: tl.constexpr, BN: tl.constexpr):
    """Q4_K (or Q5_K): the dot products of rows [BN, 1, 1] with the entry's input -> float32 [BN, 4, 8] partials."""
    c = tl.arange(0, 4)[None, :, None]
    w = tl.arange(0, 8)[None, None, :]
    acc = tl.zeros([BN, 4, 8], dtype=tl.float32)
    for t in range(0, K // 256):
        bb = row + t * (176 if FIVE_BITS else 144)
        sc_lo, mn_lo = k4_scales(bb, 2 * c, row_ok)  # [BN, 4, 1]
        sc_hi, mn_hi = k4_scales(bb, 2 * c + 1, row_ok)
        d = f16_at(bb, row_ok)
        dmin = f16_at(bb + 2, row_ok)
        words = tl.load((bb + (48 if FIVE_BITS else 16) + c * 32 + w * 4).to(tl.pointer_type(tl.int32)),
                        mask=row_ok, other=0)  # [BN, 4, 8]
        if FIVE_BITS:
            high = tl.load((bb + 16 + w * 4).to(tl.pointer_type(tl.int32)), mask=row_ok, other=0)  # [BN, 1, 8]
        k = t * 256 + c * 64 + w * 4  # [1, 4, 8]
        dot_lo = tl.zeros([BN, 4, 8], dtype=tl.float32)
        dot_hi = tl.zeros([BN, 4, 8], dtype=tl.float32)
        sum_lo = tl.zeros([1, 4, 8], dtype=tl.float32)
        sum_hi = tl.zeros([1, 4, 8], dtype=tl.float32)
        for i in tl.static_range(4):
            x_lo = x_at(x_row, k + i, K, GLU)
            x_hi = x_at(x_row, k + 32 + i, K, GLU)
            q_lo = (words >> (8 * i)) & 15
            q_hi = (words >> (8 * i + 4)) & 15
            if FIVE_BITS:
                q_lo = q_lo | (((high >> (8 * i + 2 * c)) & 1) << 4)
                q_hi = q_hi | (((high >> (8 * i + 2 * c + 1)) & 1) << 4)
            dot_lo += q_lo.to(tl.float32) * x_lo
            dot_hi += q_hi.to(tl.float32) * x_hi
            sum_lo += x_lo
            sum_hi += x_hi
        acc += (d * sc_lo) * dot_lo - (dmin * mn_lo) * sum_lo + (d * sc_hi) * dot_hi - (dmin * mn_hi) * sum_hi
    return acc


@triton.jit
def q6_k_rows(row, row_ok, x_row, K, GLU: tl.constexpr, BN: tl.constexpr):
    """Q6_K: element 128h + 32s + l (l = 2 lh + i) is nibble s // 2 of low byte 64h + 32(s % 2) + l and bits 2s of
    high byte 32h + l; a = 2 (2h + s % 2) + lh // 8, b = lh % 8 -> float32 [BN, 8, 8] partials."""
    a = tl.arange(0, 8)[None, :, None]
    b = tl.arange(0, 8)[None, None, :]
    h = a // 4
    half = a % 2
    s_low = (a // 2) % 2
    acc = tl.zeros([BN, 8, 8], dtype=tl.float32)
    for t in range(0, K // 256):
        bb = row + t * 210
        low = tl.load((bb + 2 * (8 * a + b)).to(tl.pointer_type(tl.int16)), mask=row_ok, other=0).to(tl.int32)
        high = tl.load((bb + 128 + 2 * (16 * h + 8 * half + b)).to(tl.pointer_type(tl.int16)), mask=row_ok,
                       other=0).to(tl.int32)
        d = f16_at(bb + 208, row_ok)
        for nibble in tl.static_range(2):
            s = s_low + 2 * nibble
            scale = tl.load((bb + 192 + 8 * h + 2 * s + half).to(tl.pointer_type(tl.int8)), mask=row_ok,
                            other=0).to(tl.float32)  # [BN, 8, 1]
            dot = tl.zeros([BN, 8, 8], dtype=tl.float32)
            for i in tl.static_range(2):
                q = ((low >> (8 * i + 4 * nibble)) & 15) | (((high >> (8 * i + 2 * s)) & 3) << 4)
                xv = x_at(x_row, t * 256 + 128 * h + 32 * s + 2 * (8 * half + b) + i, K, GLU)
                dot += (q - 32).to(tl.float32) * xv
            acc += (d * scale) * dot
    return acc


@triton.jit
def q8_0_rows(row, row_ok, x_row, K, GLU: tl.constexpr, BN: tl.constexpr):
    """Q8_0: block g of each group of 8 -> float32 [BN, 8, 16] partials (K a multiple of 32)."""
    g = tl.arange(0, 8)[None, :, None]
    p = tl.arange(0, 16)[None, None, :]
    acc = tl.zeros([BN, 8, 16], dtype=tl.float32)
    for t in range(0, tl.cdiv(K, 256)):
        block = t * 8 + g
        block_ok = block * 32 < K  # [1, 8, 1]
        bb = row + block * 34
        d = f16_at(bb, row_ok & block_ok)  # [BN, 8, 1]
        pair = tl.load((bb + 2 + 2 * p).to(tl.pointer_type(tl.int16)), mask=row_ok & block_ok, other=0)
        pair = pair.to(tl.int32)  # sign-extended: the high byte's sign is the int16's
        k = tl.minimum(block * 32, K - 32) + 2 * p  # [1, 8, 16]; past K reads a valid element times d = 0
        first = ((pair << 24) >> 24).to(tl.float32) * x_at(x_row, k, K, GLU)
        acc += d * (first + (pair >> 8).to(tl.float32) * x_at(x_row, k + 1, K, GLU))
    return acc


@triton.jit
def gathered_gemv_blocks(x_ptr, table_ptr, rows_ptr, out_ptr, slot_bytes, offset, row_bytes, N, K, x_stride, x_div,
                         QTYPE: tl.constexpr, GLU: tl.constexpr, BN: tl.constexpr):
    """out[i, n] = sum_k W_i[n, k] * x[i // x_div, k], W_i the QTYPE matrix at byte `offset` of slot rows[i]
    (codes of engine.quant.triton_kernels.TYPE_CODE: 3 Q8_0, 4 Q4_K, 5 Q5_K, 6 Q6_K)."""
    i = tl.program_id(0)
    n = tl.program_id(1) * BN + tl.arange(0, BN)
    row_ok = (n < N)[:, None, None]
    slot = tl.load(rows_ptr + i).to(tl.int64)
    row = table_ptr + slot * slot_bytes + offset + tl.minimum(n, N - 1).to(tl.int64)[:, None, None] * row_bytes
    x_row = x_ptr + (i // x_div).to(tl.int64) * x_stride
    if QTYPE == 3:
        acc = q8_0_rows(row, row_ok, x_row, K, GLU, BN)
    elif QTYPE == 6:
        acc = q6_k_rows(row, row_ok, x_row, K, GLU, BN)
    else:
        acc = k4_rows(row, row_ok, x_row, K, QTYPE == 5, GLU, BN)
    y = tl.sum(tl.sum(acc, axis=2), axis=1)  # [BN]
    store_as(out_ptr + i.to(tl.int64) * N + n, y, n < N)
