"""Triton kernels for GGUF blocks: a gathered GEMV that dequantizes as it multiplies (decode) and a dequantize-to-
dtype kernel (prefill experts, dense weights, embedding rows).

Shape legend:
    E   entries of a gathered GEMV: (token, k) pairs, each with its own expert slot
    N   output features of a matrix (rows), K input features (columns)
    S   slot bytes: one expert's tensors, a row of the slot table
    BN  matrix rows per program; G x L = one 256-element tile of a row, in element order (e = g * L + l)

Every (entry, BN rows) program reduces its rows over K alone, in one fixed order (tile by tile, then one tl.sum),
so its result never depends on the other entries of the launch. Both kernels are launched with fp fusion off:
the dequantized values are then the reference's (engine.quant.reference) bit for bit, (d * sc) * q - dmin * m
with every product rounded, not an fma."""

from __future__ import annotations

import triton
import triton.language as tl

from engine.quant.reference import IQ4_VALUES
from engine.quant.types import SUPPORTED, QuantType

TILE = 256  # elements of a row dequantized per step: one k-quant super-block, 8 Q8_0 blocks
TYPE_CODE = {t: t.kernel_code for t in SUPPORTED}


def tile_shape(qtype: QuantType) -> tuple[int, int]:
    """(G, L): a TILE-element step as G groups of L elements, one scale per group (Q6_K: 16 of 16; others 8 of 32)."""
    return TILE // qtype.scale_group, qtype.scale_group


@triton.jit
def f16_at(ptr, ok):
    """The little-endian f16 at byte pointers ptr (any alignment) -> float32."""
    bits = tl.load(ptr, mask=ok, other=0).to(tl.uint16) | (tl.load(ptr + 1, mask=ok, other=0).to(tl.uint16) << 8)
    return bits.to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def bf16_bits(v):
    """float32 -> the bits of the nearest bf16 (ties to even) in the high half of a uint32, spelt out because
    Triton's interpreter truncates on .to(tl.bfloat16)."""
    bits = v.to(tl.uint32, bitcast=True)
    return (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000


@triton.jit
def rounded(v, dtype: tl.constexpr):
    """float32 v rounded to dtype, as float32."""
    if dtype == tl.bfloat16:
        return bf16_bits(v).to(tl.float32, bitcast=True)
    else:
        return v.to(dtype).to(tl.float32)


@triton.jit
def store_as(ptr, v, mask):
    """Store float32 v into ptr's dtype, rounding to nearest even."""
    if ptr.dtype.element_ty == tl.bfloat16:
        tl.store(ptr.to(tl.pointer_type(tl.uint16)), (bf16_bits(v) >> 16).to(tl.uint16), mask=mask)
    else:
        tl.store(ptr, v.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def k4_scales(bb, g, ok):
    """Q4_K/Q5_K: the 6-bit scale and min of sub-block g [.., G, 1] of the blocks at bb -> float32 each."""
    a = tl.load(bb + 4 + g, mask=ok, other=0)  # the 12 scale bytes s[0..11] start at byte 4
    b = tl.load(bb + 8 + g, mask=ok, other=0)  # s[g + 4]
    c = tl.load(bb + tl.where(g >= 4, g, g + 4), mask=ok, other=0)  # s[g - 4] for g >= 4 (any valid byte below)
    low = g < 4
    sc = tl.where(low, a & 63, (b & 15) | ((c >> 6) << 4))
    mn = tl.where(low, b & 63, (b >> 4) | ((a >> 6) << 4))
    return sc.to(tl.float32), mn.to(tl.float32)


@triton.jit
def e2m1_doubled(nibble):
    """An e2m1 nibble -> twice its value, float32: magnitudes 0 1 2 3 4 6 8 12 by the low three bits, negated
    as integers so nibble 8 is +0 as in ggml's table."""
    m = (nibble & 7).to(tl.int32)
    big = ((4 + 2 * (m & 1)) << (m >> 1)) >> 2  # m >= 4: 4, 6, 8, 12
    magnitude = tl.where(m < 4, m, big)
    return tl.where(nibble >= 8, -magnitude, magnitude).to(tl.float32)


@triton.jit
def e8m0_half(e):
    """E8M0 scale bytes -> float32 2^(e - 128) (reference.e8m0_half)."""
    e = e.to(tl.uint32)
    return tl.where(e < 2, 0x00200000 << e, (e - 1) << 23).to(tl.float32, bitcast=True)


@triton.jit
def legacy_block(bb, l, ok, block_ok, MIN: tl.constexpr, FIFTH: tl.constexpr):
    """Q4_0 / Q4_1 (MIN) / Q5_0 (FIFTH) / Q5_1 (both): element l of the 32-element blocks at bb [.., G, 1] ->
    float32. A block is d (f16), then m (f16) if MIN, then the fifth bits (bit l of 4 bytes) if FIFTH, then 16
    bytes whose low nibbles are elements 0-15 and high nibbles 16-31; its values d * (q - 8 or 16), or d * q + m."""
    HEAD: tl.constexpr = 4 if MIN else 2
    QS: tl.constexpr = HEAD + 4 if FIFTH else HEAD
    q = ((tl.load(bb + QS + (l % 16), mask=ok, other=0) >> ((l // 16) * 4)) & 15).to(tl.int32)
    if FIFTH:
        q = q | (((tl.load(bb + HEAD + l // 8, mask=ok, other=0) >> (l % 8)) & 1).to(tl.int32) << 4)
    d = f16_at(bb, block_ok)
    if MIN:
        v = d * q.to(tl.float32) + f16_at(bb + 2, block_ok)
    elif FIFTH:
        v = d * (q - 16).to(tl.float32)
    else:
        v = d * (q - 8).to(tl.float32)
    return v


@triton.jit
def two_bit_low(bb, g, l, ok):
    """Q2_K's values, Q3_K's low bits: element e = 16 g + l of the 64 bytes at bb, bits 2s, 2s + 1 of byte
    32 h + e % 32 (half h = e // 128, s = e % 128 // 32) -> int32."""
    byte = tl.load(bb + (g // 8) * 32 + (g % 2) * 16 + l, mask=ok, other=0)
    return ((byte >> (((g % 8) // 2) * 2)) & 3).to(tl.int32)


@triton.jit
def q3k_scale(bb, g, ok):
    """Q3_K: the signed 6-bit scale of group g [.., G, 1] from the 12 bytes at bb -> float32."""
    low = (tl.load(bb + g % 8, mask=ok, other=0) >> ((g // 8) * 4)) & 15
    high = (tl.load(bb + 8 + g % 4, mask=ok, other=0) >> ((g // 4) * 2)) & 3
    return ((low | (high << 4)).to(tl.int32) - 32).to(tl.float32)


# ggml's kvalues_iq4nl as magnitudes packed a byte each into two int64 words: entries 0-7 (negative) and 8-15
# (positive), entry 8i + j in byte j of word i
IQ4_NEGATIVE = tl.constexpr(sum(-v << (8 * j) for j, v in enumerate(IQ4_VALUES[:8])))
IQ4_POSITIVE = tl.constexpr(sum(v << (8 * j) for j, v in enumerate(IQ4_VALUES[8:])))


@triton.jit
def iq4_value(q):
    """IQ4_NL / IQ4_XS nibbles q -> their table values, float32."""
    is_negative = q < 8
    packed = tl.where(is_negative, IQ4_NEGATIVE, IQ4_POSITIVE).to(tl.int64)
    magnitude = ((packed >> ((q & 7) * 8).to(tl.int64)) & 255).to(tl.int32)
    return tl.where(is_negative, -magnitude, magnitude).to(tl.float32)


@triton.jit
def tile(row, t, g, l, row_ok, K, QTYPE: tl.constexpr, G: tl.constexpr, L: tl.constexpr):
    """Tile t of the rows (K elements each) starting at byte pointers row [BN, 1, 1] -> float32 [BN, G, L] in
    element order; rows where row_ok is false and elements past K read nothing and are 0."""
    e = t * (G * L) + g * L + l
    ok = row_ok & (e < K)
    if QTYPE <= 2:  # F32, F16, BF16: plain values
        if QTYPE == 0:
            v = tl.load((row + e * 4).to(tl.pointer_type(tl.float32)), mask=ok, other=0.0)
        elif QTYPE == 1:
            v = tl.load((row + e * 2).to(tl.pointer_type(tl.float16)), mask=ok, other=0.0).to(tl.float32)
        else:
            bits = tl.load((row + e * 2).to(tl.pointer_type(tl.uint16)), mask=ok, other=0)
            v = (bits.to(tl.uint32) << 16).to(tl.float32, bitcast=True)  # exact, subnormals included
    elif QTYPE == 3:  # Q8_0: tile t is blocks 8t .. 8t + 7, block g of them holds elements 32g .. 32g + 31
        bb = row + (t * G + g) * 34
        d = f16_at(bb, row_ok & ((t * G + g) * 32 < K))  # [BN, G, 1]
        q = tl.load((bb + 2 + l).to(tl.pointer_type(tl.int8)), mask=ok, other=0).to(tl.float32)
        v = q * d
    elif QTYPE == 4:  # Q4_K: sub-block g is the low (g even) or high nibbles of bytes 32 (g // 2) + l
        bb = row + t * 144
        sc, mn = k4_scales(bb, g, row_ok)
        q = (tl.load(bb + 16 + (g // 2) * 32 + l, mask=ok, other=0) >> ((g % 2) * 4)) & 15
        v = (f16_at(bb, row_ok) * sc) * q.to(tl.float32) - f16_at(bb + 2, row_ok) * mn
    elif QTYPE == 5:  # Q5_K: Q4_K's nibbles plus bit g of byte l of qh as the fifth bit
        bb = row + t * 176
        sc, mn = k4_scales(bb, g, row_ok)
        low = (tl.load(bb + 48 + (g // 2) * 32 + l, mask=ok, other=0) >> ((g % 2) * 4)) & 15
        high = (tl.load(bb + 16 + l, mask=ok, other=0) >> g) & 1
        v = (f16_at(bb, row_ok) * sc) * (low | (high << 4)).to(tl.float32) - f16_at(bb + 2, row_ok) * mn
    elif QTYPE == 7:  # MXFP4: block g of tile t holds elements 32g .. 32g + 31; l < 16 low nibbles, then high
        bb = row + (t * G + g) * 17
        d = e8m0_half(tl.load(bb, mask=row_ok & ((t * G + g) * 32 < K), other=0))  # [BN, G, 1]
        q = (tl.load(bb + 1 + (l % 16), mask=ok, other=0) >> ((l // 16) * 4)) & 15
        v = d * e2m1_doubled(q)
    elif QTYPE == 12:  # Q3_K, G = L = 16: 2-bit lows, less 4 where the third bit (bit e // 32 of byte e % 32) is clear
        bb = row + t * 110
        high = (tl.load(bb + (g % 2) * 16 + l, mask=ok, other=0) >> (g // 2)) & 1
        q = two_bit_low(bb + 32, g, l, ok) - ((high ^ 1).to(tl.int32) << 2)
        v = (f16_at(bb + 108, row_ok) * q3k_scale(bb + 96, g, row_ok)) * q.to(tl.float32)
    elif QTYPE == 13:  # Q2_K, G = L = 16: group g's scale byte holds its 4-bit scale (low) and min (high)
        bb = row + t * 84
        sc = tl.load(bb + g, mask=row_ok, other=0)
        q = two_bit_low(bb + 16, g, l, ok).to(tl.float32)
        dm = f16_at(bb + 82, row_ok) * (sc >> 4).to(tl.float32)
        v = (f16_at(bb + 80, row_ok) * (sc & 15).to(tl.float32)) * q - dm
    elif QTYPE == 14:  # IQ4_NL: Q4_0's layout, the nibbles indexing the table
        bb = row + (t * G + g) * 18
        q = (tl.load(bb + 2 + (l % 16), mask=ok, other=0) >> ((l // 16) * 4)) & 15
        v = f16_at(bb, row_ok & ((t * G + g) * 32 < K)) * iq4_value(q)
    elif QTYPE == 15:  # IQ4_XS: sub-block g's 6-bit scale, then IQ4_NL nibbles in bytes 8 + 16 g ..
        bb = row + t * 136
        low = (tl.load(bb + 4 + g // 2, mask=row_ok, other=0) >> ((g % 2) * 4)) & 15
        high = (tl.load(bb + 2 + g // 4, mask=row_ok, other=0) >> ((g % 4) * 2)) & 3
        scale = ((low | (high << 4)).to(tl.int32) - 32).to(tl.float32)
        q = (tl.load(bb + 8 + g * 16 + (l % 16), mask=ok, other=0) >> ((l // 16) * 4)) & 15
        v = (f16_at(bb, row_ok) * scale) * iq4_value(q)
    elif QTYPE >= 8:  # Q4_0, Q4_1, Q5_0, Q5_1 (18, 20, 22, 24 bytes): block g of tile t holds elements 32g + l
        bb = row + (t * G + g) * (2 * QTYPE + 2)
        v = legacy_block(bb, l, ok, row_ok & ((t * G + g) * 32 < K), QTYPE % 2 == 1, QTYPE >= 10)
    else:  # Q6_K, G = L = 16: element e = 16 g + l is in 32-group j = e // 32: half h = j // 4, quarter s = j % 4
        bb = row + t * 210
        j = g // 2
        lane = (g % 2) * 16 + l
        h = j // 4
        s = j % 4
        low = (tl.load(bb + h * 64 + (s % 2) * 32 + lane, mask=ok, other=0) >> ((s // 2) * 4)) & 15
        high = (tl.load(bb + 128 + h * 32 + lane, mask=ok, other=0) >> (s * 2)) & 3
        q = (low | (high << 4)).to(tl.int32) - 32
        scale = tl.load((bb + 192 + g).to(tl.pointer_type(tl.int8)), mask=row_ok, other=0).to(tl.float32)
        v = (f16_at(bb + 208, row_ok) * scale) * q.to(tl.float32)
    return v


@triton.jit
def gathered_gemv(x_ptr, table_ptr, rows_ptr, out_ptr, slot_bytes, offset, row_bytes, N, K, x_stride, x_div,
                  QTYPE: tl.constexpr, GLU: tl.constexpr, BN: tl.constexpr, G: tl.constexpr, L: tl.constexpr):
    """out[i, n] = sum_k W_i[n, k] * x[i // x_div, k], W_i the matrix at byte `offset` of slot rows[i].
    GLU: x rows hold [gate | up] (2K) and the input is silu(gate) * up, each rounded to x's dtype."""
    i = tl.program_id(0)
    n = tl.program_id(1) * BN + tl.arange(0, BN)
    slot = tl.load(rows_ptr + i).to(tl.int64)
    row = table_ptr + slot * slot_bytes + offset + n.to(tl.int64)[:, None, None] * row_bytes  # [BN, 1, 1]
    g = tl.arange(0, G)[None, :, None]
    l = tl.arange(0, L)[None, None, :]
    row_ok = (n < N)[:, None, None]
    x_row = x_ptr + (i // x_div).to(tl.int64) * x_stride
    acc = tl.zeros([BN, G, L], dtype=tl.float32)
    for t in range(0, tl.cdiv(K, G * L)):
        k = t * (G * L) + g * L + l  # [1, G, L]
        k_ok = k < K
        if GLU:
            gate = tl.load(x_row + k, mask=k_ok, other=0.0).to(tl.float32)
            up = tl.load(x_row + K + k, mask=k_ok, other=0.0).to(tl.float32)
            act = rounded(gate / (1.0 + tl.exp(-gate)), x_ptr.dtype.element_ty)
            xv = rounded(act * up, x_ptr.dtype.element_ty)
        else:
            xv = tl.load(x_row + k, mask=k_ok, other=0.0).to(tl.float32)
        w = tile(row, t, g, l, row_ok, K, QTYPE, G, L)
        acc += w * xv
    y = tl.sum(tl.sum(acc, axis=2), axis=1)  # [BN]
    store_as(out_ptr + i.to(tl.int64) * N + n, y, n < N)


@triton.jit
def dequantize(src_ptr, out_ptr, N, K, row_bytes, QTYPE: tl.constexpr, BN: tl.constexpr, G: tl.constexpr,
               L: tl.constexpr):
    """out [N, K] = the rows of the blocks at src_ptr (row_bytes apart), cast to out's dtype."""
    n = tl.program_id(0) * BN + tl.arange(0, BN)
    t = tl.program_id(1)
    g = tl.arange(0, G)[None, :, None]
    l = tl.arange(0, L)[None, None, :]
    k = t * (G * L) + g * L + l
    row_ok = (n < N)[:, None, None]
    row = src_ptr + n.to(tl.int64)[:, None, None] * row_bytes
    w = tile(row, t, g, l, row_ok, K, QTYPE, G, L)
    ok = row_ok & (k < K)
    store_as(out_ptr + n.to(tl.int64)[:, None, None] * K + k, w, ok)

