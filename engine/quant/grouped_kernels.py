"""Triton kernels of the grouped MoE GEMM (large steps): the (token, k) rows of a layer-step sorted by expert, one
launch for gate_up (with the activation in its epilogue) and one for down (with the routing weight), each weight
tile dequantized in the K loop (engine.quant.triton_kernels.tile) straight from the expert's slot row.

Shape legend:
    M   grouped rows: (token, k) entries sorted by expert; a tile is BM consecutive rows of one expert
    N   output features (I for gate_up's two halves, D for down), K input features (D, then I)
    BK  256 elements of K per step: one tile of triton_kernels.tile, whatever the block type

Every (row tile, BN columns) program owns its output tile and reduces K in one fixed order (256 at a time, in
ascending K), with one tile shape for the step: a row's result never depends on the other rows or experts of the
launch, so computing the experts in one launch, or group by group as the pager fetches them, gives the same bits.
SWAP computes each tile transposed (mma): the same products, on the tensor cores' other side."""

from __future__ import annotations

import triton
import triton.language as tl

from engine.quant.grouped_tiles import q4k_tile, q6k_tile
from engine.quant.triton_kernels import rounded, store_as, tile


@triton.jit
def weight_tile(table, at, n, n_ok, t, row_bytes, K, QTYPE: tl.constexpr, G: tl.constexpr, L: tl.constexpr,
                BN: tl.constexpr, DT: tl.constexpr, WORDS: tl.constexpr, IEEE: tl.constexpr):
    """Rows n [BN] of the matrix at byte offset `at` (int64) of the table (a byte pointer), K-tile t -> [BN, 256]
    in DT, each value the dequantized float32 rounded to nearest as dequantize() to DT gives it. WORDS: Q4_K and
    Q6_K tiles come from 32-bit loads (engine.quant.grouped_tiles), the launcher having checked the alignment they
    need; IEEE (the interpreter, or fp32): the rounding spelt out, since the interpreter's cast truncates."""
    if WORDS and QTYPE == 4:
        w = q4k_tile(table.to(tl.pointer_type(tl.uint32)), at // 4 + n.to(tl.int64) * (row_bytes // 4), n_ok, t, BN)
    elif WORDS and QTYPE == 6:
        w = q6k_tile(table.to(tl.pointer_type(tl.uint32)), at + n.to(tl.int64) * row_bytes, n_ok, t, BN)
    else:
        row = table + at + n.to(tl.int64)[:, None, None] * row_bytes  # [BN, 1, 1]
        g = tl.arange(0, G)[None, :, None]
        l = tl.arange(0, L)[None, None, :]
        w = tl.reshape(tile(row, t, g, l, n_ok[:, None, None], K, QTYPE, G, L), (BN, G * L))  # element order
    if IEEE:
        return rounded(w, DT).to(DT)
    else:
        return w.to(DT)  # round to nearest even


@triton.jit
def input_tile(ptr, m, m_ok, k, K, EVEN_K: tl.constexpr):
    """Rows m [BM] of the [M, K] matrix at ptr, columns k [256] -> [BM, 256]; EVEN_K: K is a multiple of 256 (the
    mask is then constant along a row, so the loads can be vectorised)."""
    at = ptr + m.to(tl.int64)[:, None] * K + k[None, :]
    if EVEN_K:
        return tl.load(at, mask=m_ok[:, None], other=0.0)
    else:
        return tl.load(at, mask=m_ok[:, None] & (k < K)[None, :], other=0.0)


@triton.jit
def dot(a, b, acc, IEEE: tl.constexpr):
    """acc + a @ b.T; fp32 operands multiply in full precision (IEEE), never TF32. Triton's interpreter computes a
    16-bit dot wrongly, so there (IEEE set by the launcher) 16-bit operands are widened first: exact, and the
    products are then exact in fp32 as on the tensor cores."""
    if IEEE:
        return tl.dot(a.to(tl.float32), tl.trans(b.to(tl.float32)), acc, input_precision="ieee")
    else:
        return tl.dot(a, tl.trans(b), acc)


@triton.jit
def zeros(BM: tl.constexpr, BN: tl.constexpr, SWAP: tl.constexpr):
    """A program's float32 accumulator: [BM, BN], or (SWAP) its transpose [BN, BM]."""
    if SWAP:
        return tl.zeros([BN, BM], dtype=tl.float32)
    else:
        return tl.zeros([BM, BN], dtype=tl.float32)


@triton.jit
def mma(x, w, acc, SWAP: tl.constexpr, IEEE: tl.constexpr):
    """acc + x @ w.T for token rows x [BM, 256] and weight rows w [BN, 256]; SWAP: the transpose, acc + w @ x.T
    [BN, BM], so that the weight tile is the tensor cores' M side (64 rows and more on Hopper) and a few token rows
    fill their N side (from 16) without the multiplies of a tall tile's empty rows."""
    if SWAP:
        return dot(w, x, acc, IEEE)
    else:
        return dot(x, w, acc, IEEE)


@triton.jit
def unswapped(acc, SWAP: tl.constexpr):
    """The accumulator as [BM, BN]."""
    if SWAP:
        return tl.trans(acc)
    else:
        return acc


@triton.jit
def row_tile(tiles_ptr, BM: tl.constexpr):
    """This program's row tile: (slot row, expert id, first row, end of the expert's span). Programs run column
    block fastest: the programs of one row tile are neighbours, and so are an expert's tiles (its weights stay in
    L2). A tile whose first row is not below the end is empty: a table planned on the device has room for the
    most tiles a step can have, and its unused entries are empty."""
    entry = tiles_ptr + tl.program_id(1) * 4
    slot = tl.load(entry).to(tl.int64)
    expert = tl.load(entry + 1).to(tl.int64)
    return slot, expert, tl.load(entry + 2), tl.load(entry + 3)


@triton.jit
def grouped_gate_up(x_ptr, table_ptr, tiles_ptr, h_ptr, bias_ptr, slot_bytes, gate_offset, up_offset,
                    gate_row_bytes, up_row_bytes, N, K, alpha, limit,
                    GATE_TYPE: tl.constexpr, UP_TYPE: tl.constexpr, GATE_G: tl.constexpr, GATE_L: tl.constexpr,
                    UP_G: tl.constexpr, UP_L: tl.constexpr, CLAMPED: tl.constexpr, HAS_BIAS: tl.constexpr,
                    IEEE: tl.constexpr, WORDS: tl.constexpr, EVEN_K: tl.constexpr, BM: tl.constexpr,
                    BN: tl.constexpr, SWAP: tl.constexpr):
    """h[m, n] = act(gate[m, n], up[m, n]) for the rows m of each tile: gate = x @ Wg.T, up = x @ Wu.T of the
    tile's expert (x [M, K], h [M, N]), each rounded to x's dtype, plus the expert's bias row [2N] if any.
    act: silu(gate) * up, or (CLAMPED) gpt-oss's clamped SwiGLU, op by op in x's dtype as
    engine.experts.formats.activation computes it."""
    DT: tl.constexpr = x_ptr.dtype.element_ty
    slot, expert, first, end = row_tile(tiles_ptr, BM)
    if first >= end:
        return
    m = first + tl.arange(0, BM)
    m_ok = m < end
    n = tl.program_id(0) * BN + tl.arange(0, BN)
    n_ok = n < N
    block = slot * slot_bytes
    acc_gate = zeros(BM, BN, SWAP)
    acc_up = zeros(BM, BN, SWAP)
    for t in range(0, tl.cdiv(K, 256)):
        k = t * 256 + tl.arange(0, 256)
        x = input_tile(x_ptr, m, m_ok, k, K, EVEN_K)
        w = weight_tile(table_ptr, block + gate_offset, n, n_ok, t, gate_row_bytes, K, GATE_TYPE, GATE_G, GATE_L, BN,
                        DT, WORDS, IEEE)
        acc_gate = mma(x, w, acc_gate, SWAP, IEEE)
        w = weight_tile(table_ptr, block + up_offset, n, n_ok, t, up_row_bytes, K, UP_TYPE, UP_G, UP_L, BN, DT, WORDS,
                        IEEE)
        acc_up = mma(x, w, acc_up, SWAP, IEEE)
    gate = rounded(unswapped(acc_gate, SWAP), DT)
    up = rounded(unswapped(acc_up, SWAP), DT)
    if HAS_BIAS:
        bias = bias_ptr + expert * 2 * N
        gate = rounded(gate + tl.load(bias + n, mask=n_ok, other=0.0).to(tl.float32)[None, :], DT)
        up = rounded(up + tl.load(bias + N + n, mask=n_ok, other=0.0).to(tl.float32)[None, :], DT)
    if CLAMPED:
        gate = tl.minimum(gate, limit)
        up = tl.minimum(tl.maximum(up, -limit), limit)
        scaled = rounded(gate * alpha, DT)
        glu = rounded(gate * rounded(1.0 / (1.0 + tl.exp(-scaled)), DT), DT)
        h = rounded((rounded(up + 1.0, DT)) * glu, DT)
    else:
        h = rounded(rounded(gate / (1.0 + tl.exp(-gate)), DT) * up, DT)
    store_as(h_ptr + m.to(tl.int64)[:, None] * N + n[None, :], h, m_ok[:, None] & n_ok[None, :])


@triton.jit
def grouped_down(h_ptr, table_ptr, tiles_ptr, out_ptr, weights_ptr, bias_ptr, slot_bytes, down_offset, row_bytes,
                 N, K, DOWN_TYPE: tl.constexpr, G: tl.constexpr, L: tl.constexpr, HAS_BIAS: tl.constexpr,
                 IEEE: tl.constexpr, WORDS: tl.constexpr, EVEN_K: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                 SWAP: tl.constexpr):
    """out[m, n] = (h @ Wd.T)[m, n] (+ the expert's bias [N]) times the routing weight of row m, each step rounded
    to h's dtype but the last product, computed in float32 and rounded once (as rows.mul_(weights) does)."""
    DT: tl.constexpr = h_ptr.dtype.element_ty
    slot, expert, first, end = row_tile(tiles_ptr, BM)
    if first >= end:
        return
    m = first + tl.arange(0, BM)
    m_ok = m < end
    n = tl.program_id(0) * BN + tl.arange(0, BN)
    n_ok = n < N
    matrix = slot * slot_bytes + down_offset
    acc = zeros(BM, BN, SWAP)
    for t in range(0, tl.cdiv(K, 256)):
        k = t * 256 + tl.arange(0, 256)
        h = input_tile(h_ptr, m, m_ok, k, K, EVEN_K)
        w = weight_tile(table_ptr, matrix, n, n_ok, t, row_bytes, K, DOWN_TYPE, G, L, BN, DT, WORDS, IEEE)
        acc = mma(h, w, acc, SWAP, IEEE)
    y = rounded(unswapped(acc, SWAP), DT)
    if HAS_BIAS:
        y = rounded(y + tl.load(bias_ptr + expert * N + n, mask=n_ok, other=0.0).to(tl.float32)[None, :], DT)
    y = y * tl.load(weights_ptr + m, mask=m_ok, other=0.0).to(tl.float32)[:, None]
    store_as(out_ptr + m.to(tl.int64)[:, None] * N + n[None, :], y, m_ok[:, None] & n_ok[None, :])
