"""The decode GEMV over GGUF k-quant blocks with wide loads and every load of a step issued before any is used
(engine.quant.linear's gathered_gemv, gathered_swiglu, scaled_gemv and quant_gemv run it for Q4_K, Q5_K and Q6_K
where linear.wide_split picks it).

Shape legend:
    E   entries of a gathered GEMV: (token, k) pairs, each with its own expert slot
    N   output features of a matrix (rows), K input features (columns)
    BN  matrix rows per program (with the SwiGLU epilogue: BN / 2 gate rows, then the same BN / 2 up rows)
    SB  256-element super-blocks of each row per step of the K loop (a warp's 32 lanes split SB blocks)
    k4_wide_dot's tile is [BN, P, SB, 4L, 2], q6k_wide_dot's [BN, SB, 32 / SB]; each says which bytes a lane holds

Q4_K and Q5_K (144- and 176-byte blocks, rows 16-byte aligned) are read in 64-bit pieces of nibble bytes, lanes
on consecutive pieces, each lane holding 2-4 pieces of one sub-block pair so its scales serve 32-64 values a row;
x is read as 64-bit words of four bf16 or f16 values. Q6_K (210-byte blocks, rows 2-byte aligned) is read in
16-bit pieces, each lane holding SB pieces of 16 elements under one scale per quarter; x as 32-bit pairs. A quant
value becomes a float without a conversion instruction (engine.quant.gemv_kernels.small_int), several values of
a word with one or of MAGIC.

Every layout the compiler picks for these loads is the same blocked one (the vector axis, or none, last; rows and
pieces in registers), so no value crosses threads before the final sums. Each (entry, BN rows) program reduces its
rows over K alone in one fixed order, so an entry's bits never depend on the other entries of the launch or on
the provider that placed its slot. Rows must start on 16-byte boundaries (linear.runs_wide checks the matrix's
offset and the table)."""

from __future__ import annotations

import triton
import triton.language as tl

from engine.quant.gemv_kernels import MAGIC, f16_of, k4_scale_words, small_int
from engine.quant.triton_kernels import rounded, store_as
from engine.quant.types import SUPPORTED

WIDE_TYPES = {t.name: t.kernel_code for t in SUPPORTED if t.wide_gemv}  # type name -> the kernels' type code


@triton.jit
def x_quads(x_row, quad, ok, ELEMENTS_16: tl.constexpr):
    """Elements 4 quad .. 4 quad + 3 of x as float32 a, b, c, d. ELEMENTS_16: x holds bf16 or f16 values, read
    as one 64-bit word; otherwise x is float32, read one value at a time."""
    if ELEMENTS_16:
        word = tl.load(x_row.to(tl.pointer_type(tl.int64)) + quad, mask=ok, other=0)
        lo = (word & 0xFFFFFFFF).to(tl.int32)
        hi = (word >> 32).to(tl.int32)
        if x_row.dtype.element_ty == tl.bfloat16:
            return ((lo << 16).to(tl.float32, bitcast=True), (lo & -65536).to(tl.float32, bitcast=True),
                    (hi << 16).to(tl.float32, bitcast=True), (hi & -65536).to(tl.float32, bitcast=True))
        else:
            return f16_of(lo), f16_of(lo >> 16), f16_of(hi), f16_of(hi >> 16)
    else:
        e = quad * 4
        return (tl.load(x_row + e, mask=ok, other=0.0).to(tl.float32),
                tl.load(x_row + e + 1, mask=ok, other=0.0).to(tl.float32),
                tl.load(x_row + e + 2, mask=ok, other=0.0).to(tl.float32),
                tl.load(x_row + e + 3, mask=ok, other=0.0).to(tl.float32))


@triton.jit
def piece_dot(q, x0, x1_8, x2_16, x3, MASK: tl.constexpr):
    """sum_j q_j * x_j over the 4 values of each word, q_j = (q >> 8j) & MASK (MASK < 32, the values of bytes 1 and 2
    taken in place as q_j * 2^(8j), against x1_8 = x_1 / 2^8 and x2_16 = x_2 / 2^16). A value becomes a float as in
    small_int, with MAGIC or'ed into the word once: then one and a value for bytes 0-2 (q_j * 2^(8j) < 2^23)."""
    qm = q | MAGIC
    dot = ((qm & (MAGIC | MASK)).to(tl.float32, bitcast=True) - 8388608.0) * x0
    dot += ((qm & (MAGIC | (MASK << 8))).to(tl.float32, bitcast=True) - 8388608.0) * x1_8
    dot += ((qm & (MAGIC | (MASK << 16))).to(tl.float32, bitcast=True) - 8388608.0) * x2_16
    dot += small_int((q >> 24) & MASK, 0.0) * x3
    return dot


@triton.jit
def fifth_bits(qs, qh, bit):
    """Q5_K: or the fifth bit of each nibble byte into it: bit `bit` of qh byte j lands at bit 4 of byte j."""
    return qs | (((qh >> bit) & 0x01010101) << 4)


@triton.jit
def word_of(pair, w, k: tl.constexpr):
    """Word k of each pair of words [.., 2] (the last axis, inside one thread) -> [.., 1]."""
    return tl.sum(tl.where(w == k, pair, 0), axis=4, keep_dims=True)


@triton.jit
def k4_wide_dot(row, row_ok, x_row, K, BN: tl.constexpr, SB: tl.constexpr, Q5: tl.constexpr,
                ELEMENTS_16: tl.constexpr):
    """Q4_K (Q5: Q5_K) rows at 16-byte-aligned byte pointers row [BN] times x -> [BN] float32. Tile
    [BN, P, SB, 4L, 2]: lane c = L g + l of super-block s holds, in words p L + l of each 8-word group g of the nibble
    bytes (sub-blocks 2g and 2g + 1), P 64-bit pieces (L = 8 / SB lanes a group, P = 4 / L pieces a lane), so one
    thread's scales serve 16 P values a row."""
    BLOCK: tl.constexpr = 176 if Q5 else 144
    QS: tl.constexpr = 48 if Q5 else 16  # the nibble bytes' offset in the block
    tl.static_assert(SB == 2 or SB == 4 or SB == 8, "2, 4 or 8 super-blocks a step")
    L: tl.constexpr = 8 // SB
    P: tl.constexpr = 4 // L
    p = tl.arange(0, P)[None, :, None, None, None]
    sb = tl.arange(0, SB)[None, None, :, None, None]
    c = tl.arange(0, 4 * L)[None, None, None, :, None]
    w = tl.arange(0, 2)[None, None, None, None, :]
    g = c // L  # the lane's 8-word group
    word = g * 8 + (p * L + c % L) * 2 + w  # [1, P, 1, 4L, 2]: the word of the block's nibble bytes
    row = tl.multiple_of(row, 16)[:, None, None, None, None]
    row_ok = row_ok[:, None, None, None, None]
    acc = tl.sum(tl.zeros([BN, 1, SB, 4 * L, 2], dtype=tl.float32), axis=4, keep_dims=True)
    for t in range(0, tl.cdiv(K, 256 * SB)):
        b = t * SB + sb  # [1, 1, SB, 1, 1]
        b_ok = b * 256 < K
        ok = row_ok & b_ok
        bb = (row + b * BLOCK).to(tl.pointer_type(tl.int32))  # [BN, 1, SB, 1, 1]: word pointers (word offsets
        # below keep a piece's 2 words contiguous to the compiler, which then loads them as one 64-bit word)
        qs = tl.load(bb + (QS // 4 + word), mask=ok, other=0)  # [BN, P, SB, 4L, 2]
        head01 = tl.load(tl.broadcast_to(bb + w, [BN, 1, SB, 4 * L, 2]), mask=ok, other=0)  # d | dmin << 16, scales 0-3
        head23 = tl.load(tl.broadcast_to(bb + 2 + w, [BN, 1, SB, 4 * L, 2]), mask=ok, other=0)  # scale bytes 4-11
        if Q5:
            qh = tl.load(bb + (4 + word % 8), mask=ok, other=0)
        quad = b * 64 + g * 16 + word % 8  # [1, P, SB, 4L, 2]: the 64-bit x word of the word's low nibbles
        x_ok = b_ok & (word >= 0)
        lo0, lo1, lo2, lo3 = x_quads(x_row, quad, x_ok, ELEMENTS_16)
        hi0, hi1, hi2, hi3 = x_quads(x_row, quad + 8, x_ok, ELEMENTS_16)
        sum_lo = tl.sum(tl.sum((lo0 + lo1) + (lo2 + lo3), axis=4, keep_dims=True), axis=1, keep_dims=True)
        sum_hi = tl.sum(tl.sum((hi0 + hi1) + (hi2 + hi3), axis=4, keep_dims=True), axis=1, keep_dims=True)
        lo1, lo2, hi1, hi2 = lo1 * 0.00390625, lo2 * 0.0000152587890625, hi1 * 0.00390625, hi2 * 0.0000152587890625
        if Q5:  # 5-bit values: the nibbles with qh's bits 2g (low) and 2g + 1 (high) as their fifth bits
            dot_lo = piece_dot(fifth_bits(qs & 0x0F0F0F0F, qh, 2 * g), lo0, lo1, lo2, lo3, 31)
            dot_hi = piece_dot(fifth_bits((qs >> 4) & 0x0F0F0F0F, qh, 2 * g + 1), hi0, hi1, hi2, hi3, 31)
        else:
            dot_lo = piece_dot(qs, lo0, lo1, lo2, lo3, 15)
            dot_hi = piece_dot((qs >> 4) & 0x0FFFFFFF, hi0, hi1, hi2, hi3, 15)
        dot_lo = tl.sum(tl.sum(dot_lo, axis=4, keep_dims=True), axis=1, keep_dims=True)  # [BN, 1, SB, 4L, 1]
        dot_hi = tl.sum(tl.sum(dot_hi, axis=4, keep_dims=True), axis=1, keep_dims=True)
        dd = word_of(head01, w, 0)
        d = f16_of(dd)
        dmin = f16_of(dd >> 16)
        s0 = word_of(head01, w, 1)
        s1 = word_of(head23, w, 0)
        s2 = word_of(head23, w, 1)
        sc_lo, mn_lo = k4_scale_words(s0, s1, s2, 2 * g)
        sc_hi, mn_hi = k4_scale_words(s0, s1, s2, 2 * g + 1)
        acc += ((d * sc_lo) * dot_lo - (dmin * mn_lo) * sum_lo + (d * sc_hi) * dot_hi - (dmin * mn_hi) * sum_hi)
    return tl.sum(tl.sum(tl.sum(tl.sum(acc, axis=4), axis=3), axis=2), axis=1)


@triton.jit
def x_pair(x_row, pair, ok, ELEMENTS_16: tl.constexpr):
    """Elements 2 pair and 2 pair + 1 of x as float32 a, b (one 32-bit load of bf16 or f16 values)."""
    if ELEMENTS_16:
        two = tl.load(x_row.to(tl.pointer_type(tl.int32)) + pair, mask=ok, other=0)
        if x_row.dtype.element_ty == tl.bfloat16:
            return (two << 16).to(tl.float32, bitcast=True), (two & -65536).to(tl.float32, bitcast=True)
        else:
            return f16_of(two), f16_of(two >> 16)
    else:
        return (tl.load(x_row + pair * 2, mask=ok, other=0.0).to(tl.float32),
                tl.load(x_row + pair * 2 + 1, mask=ok, other=0.0).to(tl.float32))


@triton.jit
def q6_pair_dot(ql, qh, nibble: tl.constexpr, high: tl.constexpr, x0, x1_8):
    """The two 6-bit values of a 16-bit piece (low bits: the nibble at bit `nibble` of each ql byte, high bits: bits
    `high` and `high` + 1 of each qh byte), minus 32, times x0 and x1 (x1_8 = x1 / 2^8), summed. Both values are
    assembled at once in their bytes, MAGIC or'ed in once, and the second taken in place as q * 2^8."""
    if high <= 4:
        top = (qh << (4 - high)) & 0x3030
    else:
        top = (qh >> (high - 4)) & 0x3030
    qm = ((ql >> nibble) & 0x0F0F) | top | MAGIC
    v0 = (qm & (MAGIC | 0x3F)).to(tl.float32, bitcast=True) - (8388608.0 + 32.0)
    v1 = (qm & (MAGIC | 0x3F00)).to(tl.float32, bitcast=True) - (8388608.0 + 8192.0)
    return v0 * x0 + v1 * x1_8


@triton.jit
def q6k_wide_dot(row, row_ok, x_row, K, BN: tl.constexpr, SB: tl.constexpr, ELEMENTS_16: tl.constexpr):
    """Q6_K rows at 2-byte-aligned byte pointers row [BN] times x -> [BN] float32 (its 210-byte blocks allow
    nothing wider than 16-bit loads). Tile [BN, SB, 32 / SB]: lane c = 4 u + v of super-block s reads, for half
    h = v // 2 of the block and its 16 elements l0 = 16 (v % 2) .. l0 + 15 of each quarter (one scale each), the
    16-bit pieces i = SB u .. SB u + SB - 1 of ql bytes 64h + l0 (quarters 0 and 2), 64h + 32 + l0 (1 and 3) and
    qh bytes 32h + l0: 8 SB values a row under one d and four scales. Lanes of consecutive v read 16-byte runs 16
    and 64 bytes apart, consecutive u the next 2 bytes of each run."""
    U: tl.constexpr = 8 // SB  # lanes a run
    sb = tl.arange(0, SB)[None, :, None]
    c = tl.arange(0, 32 // SB)[None, None, :]
    h = (c % 4) // 2
    l0 = (c % 2) * 16
    u = c // 4
    row = row[:, None, None]
    row_ok = row_ok[:, None, None]
    acc = tl.zeros([BN, SB, 32 // SB], dtype=tl.float32)
    for t in range(0, tl.cdiv(K, 256 * SB)):
        b = t * SB + sb
        b_ok = b * 256 < K
        ok = row_ok & b_ok
        bb = row + b * 210  # [BN, SB, 1]
        piece = (bb + h * 64 + l0).to(tl.pointer_type(tl.uint16)) + u * SB  # [BN, SB, 32 / SB]: ql, quarters 0, 2
        high = (bb + 128 + h * 32 + l0).to(tl.pointer_type(tl.uint16)) + u * SB
        sc = (bb + 192 + h * 8 + l0 // 16).to(tl.pointer_type(tl.int8))  # scales of quarter s at sc + 2s
        d = f16_of(tl.load(tl.broadcast_to((bb + 208).to(tl.pointer_type(tl.uint16)), [BN, SB, 32 // SB]),
                           mask=ok, other=0).to(tl.int32))
        x_ok = b_ok & (c >= 0)
        pair = b * 128 + h * 64 + l0 // 2 + u * SB  # [1, SB, 32 / SB]: x's 32-bit pair of the first piece, quarter 0
        dot0 = tl.zeros([BN, SB, 32 // SB], dtype=tl.float32)
        dot1 = tl.zeros([BN, SB, 32 // SB], dtype=tl.float32)
        dot2 = tl.zeros([BN, SB, 32 // SB], dtype=tl.float32)
        dot3 = tl.zeros([BN, SB, 32 // SB], dtype=tl.float32)
        for i in tl.static_range(SB):
            ql_a = tl.load(piece + i, mask=ok, other=0).to(tl.int32)
            ql_b = tl.load(piece + 16 + i, mask=ok, other=0).to(tl.int32)
            qh = tl.load(high + i, mask=ok, other=0).to(tl.int32)
            a0, a1 = x_pair(x_row, pair + i, x_ok, ELEMENTS_16)
            dot0 += q6_pair_dot(ql_a, qh, 0, 0, a0, a1 * 0.00390625)
            a0, a1 = x_pair(x_row, pair + 16 + i, x_ok, ELEMENTS_16)
            dot1 += q6_pair_dot(ql_b, qh, 0, 2, a0, a1 * 0.00390625)
            a0, a1 = x_pair(x_row, pair + 32 + i, x_ok, ELEMENTS_16)
            dot2 += q6_pair_dot(ql_a, qh, 4, 4, a0, a1 * 0.00390625)
            a0, a1 = x_pair(x_row, pair + 48 + i, x_ok, ELEMENTS_16)
            dot3 += q6_pair_dot(ql_b, qh, 4, 6, a0, a1 * 0.00390625)
        s0 = tl.load(sc, mask=ok, other=0).to(tl.float32)
        s1 = tl.load(sc + 2, mask=ok, other=0).to(tl.float32)
        s2 = tl.load(sc + 4, mask=ok, other=0).to(tl.float32)
        s3 = tl.load(sc + 6, mask=ok, other=0).to(tl.float32)
        acc += d * ((s0 * dot0 + s1 * dot1) + (s2 * dot2 + s3 * dot3))
    return tl.sum(tl.sum(acc, axis=2), axis=1)


@triton.jit
def wide_gemv(x_ptr, table_ptr, rows_ptr, scale_ptr, out_ptr, slot_bytes, offset, row_bytes, N, K, x_stride, x_div,
              QTYPE: tl.constexpr, BN: tl.constexpr, SB: tl.constexpr, SWIGLU: tl.constexpr,
              SCALE: tl.constexpr):
    """out[i, n] = sum_k W_i[n, k] * x[i // x_div, k] rounded to out's dtype, W_i the matrix at byte `offset` of
    slot rows[i]. SWIGLU: W_i is [gate; up] (2N rows) and out[i, n] = silu(gate_n) * up_n, each step rounded to
    out's dtype as torch's ops would. SCALE: out[i] is then multiplied by scale[i] and rounded again."""
    i = tl.program_id(0)
    r = tl.arange(0, BN)
    ROWS: tl.constexpr = BN // 2 if SWIGLU else BN  # output rows per program
    n = tl.program_id(1) * ROWS + r % ROWS
    m = n + (r // ROWS) * N  # the matrix row: with SWIGLU the second half of the tile reads the up rows
    slot = tl.load(rows_ptr + i).to(tl.int64)
    row = table_ptr + slot * slot_bytes + offset + m.to(tl.int64) * row_bytes
    x_row = x_ptr + (i // x_div).to(tl.int64) * x_stride
    dtype = out_ptr.dtype.element_ty
    if QTYPE == 6:
        y = q6k_wide_dot(row, n < N, x_row, K, BN, SB, x_ptr.dtype.element_ty != tl.float32)
    else:
        y = k4_wide_dot(row, n < N, x_row, K, BN, SB, QTYPE == 5, x_ptr.dtype.element_ty != tl.float32)
    n_out = tl.program_id(1) * ROWS + tl.arange(0, ROWS)
    if SWIGLU:
        gate, up = tl.split(tl.permute(tl.reshape(y, [2, ROWS]), [1, 0]))
        gate = rounded(gate, dtype)
        y = rounded(rounded(gate / (1.0 + tl.exp(-gate)), dtype) * rounded(up, dtype), dtype)
    else:
        y = rounded(y, dtype)
    if SCALE:
        y = y * tl.load(scale_ptr + i).to(tl.float32)
    store_as(out_ptr + i.to(tl.int64) * N + n_out, y, n_out < N)
