"""The decode GEMV over GGUF blocks: word-wide loads of the quant blocks, the values unpacked in registers, several
rows per program (engine.quant.linear's gathered_gemv, gathered_swiglu, scaled_gemv and quant_gemv run it for
Q4_K, Q5_K, Q6_K and Q8_0 where linear.word_split picks it).

Shape legend:
    E   entries of a gathered GEMV: (token, k) pairs, each with its own expert slot
    N   output features of a matrix (rows), K input features (columns)
    BN  matrix rows per program
    S   256-element super-blocks of each row per step of the K loop
    k-quant tiles are [S, BN, 32]: the 32 lanes are runs of S words (a run lies in one sub-block pair, so its
        scales are read once), the S words of a run stay in one thread; Q8_0's is [BN, 8S, 16, 2] (block, 16-bit
        word, byte). Each type's function says which element each position holds.

Each (entry, BN rows) program reduces its rows over K alone in one fixed order (tile by tile into a register
tile, then one tl.sum), so an entry's bits never depend on the other entries of the launch or on the provider
that placed its slot. A quant value becomes a float without a conversion instruction: its bits or'ed into
2^23's exponent, minus 2^23 (exact for integers below 2^23). Q4_K and Q5_K blocks (144 and 176 bytes) are
read in 32-bit words; Q6_K and Q8_0 blocks (210 and 34 bytes, rows 2-byte aligned) in 16-bit ones."""

from __future__ import annotations

import triton
import triton.language as tl

from engine.quant.triton_kernels import rounded, store_as
from engine.quant.types import SUPPORTED

MAGIC = tl.constexpr(0x4B000000)  # the bits of 2^23 as float32: MAGIC | q is 2^23 + q for 0 <= q < 2^23
WORD_TYPES = {t.name: t.kernel_code for t in SUPPORTED if t.word_gemv}  # type name -> the kernels' type code


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
def run_sum(v):
    """[S, BN, 32] -> [1, BN, 32]: the sum over a run's words, inside each thread."""
    return tl.sum(v, axis=0, keep_dims=True)


@triton.jit
def k4_scale_words(s0, s1, s2, g):
    """Q4_K/Q5_K: the 6-bit scale and min of sub-block g from the block's 12 scale bytes as three words
    (engine.quant.reference.scale_min_k4) -> float32 each."""
    low = g < 4
    k = (g % 4) * 8  # the byte of each word that sub-block g reads
    sc = tl.where(low, (s0 >> k) & 63, ((s2 >> k) & 15) | (((s0 >> k) & 0xC0) >> 2))
    mn = tl.where(low, (s1 >> k) & 63, ((s2 >> (k + 4)) & 15) | (((s1 >> k) & 0xC0) >> 2))
    return small_int(sc, 0.0), small_int(mn, 0.0)


@triton.jit
def q4k_dot(row, row_ok, x_row, K, BN: tl.constexpr, S: tl.constexpr, Q5: tl.constexpr):
    """Q4_K (Q5: Q5_K) rows at byte pointers row [BN] times x -> [BN] float32, S super-blocks a step. Tile
    [S, BN, 32]: lane a is run r = a % R of super-block a // R (R = 32 / S runs of S words each), within run
    c = r // (R / 4) of the block (sub-blocks 2c, low nibbles, and 2c + 1, high), words S (r % (R / 4)) + w: bytes
    32c + 4w' + j, elements 64c + 4w' + j and + 32. Each thread holds whole runs (the words are visited in the
    order 5w mod S, which keeps Triton from spreading them over threads), sums q * x and x over them, and scales
    the sums once per run."""
    R: tl.constexpr = 32 // S
    a = tl.arange(0, 32)[None, None, :]
    w = ((tl.arange(0, S) * 5) % S)[:, None, None]
    c = (a % R) // (R // 4)
    word = (a % (R // 4)) * S + w  # [S, 1, 32]: the word of run c
    row = row[None, :, None]
    row_ok = row_ok[None, :, None]
    acc = tl.zeros([1, BN, 32], dtype=tl.float32)
    for t in range(0, tl.cdiv(K, 256 * S)):
        b = t * S + a // R  # [1, 1, 32]
        b_ok = b * 256 < K
        ok = row_ok & b_ok
        bb = row + b * (176 if Q5 else 144)  # [1, BN, 32]
        dd = words(bb, ok)  # d | dmin << 16, then the 12 scale bytes
        s0 = words(bb + 4, ok)
        s1 = words(bb + 8, ok)
        s2 = words(bb + 12, ok)
        qs = words(bb + (48 if Q5 else 16) + c * 32 + word * 4, ok)  # [S, BN, 32]
        if Q5:
            qh = words(bb + 16 + word * 4, ok)  # bit g of byte l is element 32g + l's fifth bit
        e = b * 256 + c * 64 + word * 4  # [S, 1, 32]
        dot_lo = tl.zeros([S, BN, 32], dtype=tl.float32)
        dot_hi = tl.zeros([S, BN, 32], dtype=tl.float32)
        sum_lo = tl.zeros([S, 1, 32], dtype=tl.float32)
        sum_hi = tl.zeros([S, 1, 32], dtype=tl.float32)
        for j in tl.static_range(4):
            x_lo = x_at(x_row, e + j, b_ok)
            x_hi = x_at(x_row, e + 32 + j, b_ok)
            lo = (qs >> (j * 8)) & 15
            hi = (qs >> (j * 8 + 4)) & 15
            if Q5:
                lo = lo | (((qh >> (j * 8 + 2 * c)) & 1) << 4)
                hi = hi | (((qh >> (j * 8 + 2 * c + 1)) & 1) << 4)
            dot_lo += small_int(lo, 0.0) * x_lo
            dot_hi += small_int(hi, 0.0) * x_hi
            sum_lo += x_lo
            sum_hi += x_hi
        d = f16_of(dd)
        dmin = f16_of(dd >> 16)
        sc_lo, mn_lo = k4_scale_words(s0, s1, s2, 2 * c)
        sc_hi, mn_hi = k4_scale_words(s0, s1, s2, 2 * c + 1)
        acc += ((d * sc_lo) * run_sum(dot_lo) - (dmin * mn_lo) * run_sum(sum_lo)
                + (d * sc_hi) * run_sum(dot_hi) - (dmin * mn_hi) * run_sum(sum_hi))
    return tl.sum(tl.sum(acc, axis=2), axis=0)


@triton.jit
def q6k_dot(row, row_ok, x_row, K, BN: tl.constexpr, S: tl.constexpr):
    """Q6_K rows at byte pointers row [BN] times x -> [BN], S super-blocks a step. Tile [S, BN, 32]: lane a is run
    r = a % R of super-block a // R (R = 32 / S runs), in half h = r // (R / 2) of the block, lanes l = L0 + 2w + j
    (L0 = 2S (r % (R / 2))); its quarters s hold elements 128h + 32s + l: the nibble of ql byte 64h + 32 (s % 2) + l
    (high if s >= 2) and bits 2s of qh byte 32h + l, scaled by byte 8h + 2s + L0 // 16. Each thread holds whole
    runs and scales its four sums once per run."""
    R: tl.constexpr = 32 // S
    a = tl.arange(0, 32)[None, None, :]
    w = ((tl.arange(0, S) * 5) % S)[:, None, None]
    h = (a % R) // (R // 2)
    first = (a % (R // 2)) * 2 * S  # [1, 1, 32]: the run's first lane
    lane = first + w * 2  # [S, 1, 32], even
    row = row[None, :, None]
    row_ok = row_ok[None, :, None]
    acc = tl.zeros([1, BN, 32], dtype=tl.float32)
    for t in range(0, tl.cdiv(K, 256 * S)):
        b = t * S + a // R
        b_ok = b * 256 < K
        ok = row_ok & b_ok
        bb = row + b * 210  # [1, BN, 32]
        d = f16_of(halves(bb + 208, ok))
        ql_even = halves(bb + h * 64 + lane, ok)  # [S, BN, 32]
        ql_odd = halves(bb + h * 64 + 32 + lane, ok)
        qh = halves(bb + 128 + h * 32 + lane, ok)
        e = b * 256 + h * 128 + lane  # [S, 1, 32]: quarter 0's element, j = 0
        for s in tl.static_range(4):
            ql = ql_even if s % 2 == 0 else ql_odd
            dot = tl.zeros([S, BN, 32], dtype=tl.float32)
            for j in tl.static_range(2):
                q = ((ql >> (j * 8 + (s // 2) * 4)) & 15) | (((qh >> (j * 8 + 2 * s)) & 3) << 4)
                dot += small_int(q, 32.0) * x_at(x_row, e + s * 32 + j, b_ok)
            pair = halves(bb + 192 + h * 8 + 2 * s, ok)  # scales 8h + 2s and 8h + 2s + 1
            scale = small_int(((pair >> ((first // 16) * 8)) & 255) ^ 128, 128.0)  # the int8 of byte L0 // 16
            acc += (d * scale) * run_sum(dot)
    return tl.sum(tl.sum(acc, axis=2), axis=0)


@triton.jit
def q8_0_dot(row, row_ok, x_row, K, BN: tl.constexpr, S: tl.constexpr):
    """Q8_0 rows times x -> [BN], 8S blocks a step. Tile [BN, 8S, 16, 2]: block b, its int8 2w + j."""
    row = row[:, None, None, None]
    row_ok = row_ok[:, None, None, None]
    b = tl.arange(0, 8 * S)[None, :, None, None]
    w = tl.arange(0, 16)[None, None, :, None]
    j = tl.arange(0, 2)[None, None, None, :]
    e = b * 32 + w * 2 + j
    acc = tl.zeros([BN, 8 * S, 16, 2], dtype=tl.float32)
    for t in range(0, tl.cdiv(K, 256 * S)):
        bb = row + (t * 8 * S + b) * 34  # [BN, 8S, 1, 1]
        ok = row_ok & ((t * 8 * S + b) * 32 < K)
        d = f16_of(halves(bb, ok))
        q = ((halves(bb + 2 + w * 2, ok) >> (j * 8)) & 255) ^ 128  # the int8 plus 128
        xv = x_at(x_row, t * S * 256 + e, t * S * 256 + e < K)
        acc += (small_int(q, 128.0) * d) * xv
    return tl.sum(tl.sum(tl.sum(acc, axis=3), axis=2), axis=1)


@triton.jit
def rows_dot(row, row_ok, x_row, K, QTYPE: tl.constexpr, BN: tl.constexpr, S: tl.constexpr):
    if QTYPE == 3:
        return q8_0_dot(row, row_ok, x_row, K, BN, S)
    elif QTYPE == 6:
        return q6k_dot(row, row_ok, x_row, K, BN, S)
    else:
        return q4k_dot(row, row_ok, x_row, K, BN, S, QTYPE == 5)


@triton.jit
def word_gemv(x_ptr, table_ptr, rows_ptr, scale_ptr, out_ptr, slot_bytes, offset, row_bytes, N, K, x_stride, x_div,
              QTYPE: tl.constexpr, BN: tl.constexpr, S: tl.constexpr, SWIGLU: tl.constexpr, SCALE: tl.constexpr):
    """out[i, n] = sum_k W_i[n, k] * x[i // x_div, k] rounded to out's dtype, W_i the matrix at byte `offset` of
    slot rows[i]. SWIGLU: W_i is [gate; up] (2N rows) and out[i, n] = silu(gate_n) * up_n, each step rounded to
    out's dtype as torch's ops would. SCALE: out[i] is then multiplied by scale[i] and rounded again."""
    i = tl.program_id(0)
    n = tl.program_id(1) * BN + tl.arange(0, BN)
    slot = tl.load(rows_ptr + i).to(tl.int64)
    row = table_ptr + slot * slot_bytes + offset + n.to(tl.int64) * row_bytes
    row_ok = n < N
    x_row = x_ptr + (i // x_div).to(tl.int64) * x_stride
    dtype = out_ptr.dtype.element_ty
    y = rounded(rows_dot(row, row_ok, x_row, K, QTYPE, BN, S), dtype)
    if SWIGLU:
        up = rounded(rows_dot(row + N.to(tl.int64) * row_bytes, row_ok, x_row, K, QTYPE, BN, S), dtype)
        y = rounded(rounded(y / (1.0 + tl.exp(-y)), dtype) * up, dtype)
    if SCALE:
        y = y * tl.load(scale_ptr + i).to(tl.float32)
    store_as(out_ptr + i.to(tl.int64) * N + n, y, n < N)
