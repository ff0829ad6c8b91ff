"""Word-wide weight tiles of the grouped MoE GEMM: a 256-element K tile of BN rows of a Q4_K or Q6_K matrix read
with 32-bit loads (8 nibbles or 4 six-bit values a load, where engine.quant.triton_kernels.tile loads one byte per
element) and unpacked in registers, then computed with the same float operations in the same order as that tile
and engine.quant.reference: the same values, bit for bit.

Q4_K rows (144 bytes a block) are word-aligned wherever their matrix is, so their words are addressed as words.
Q6_K blocks are 210 bytes: every other block starts two bytes into a word, so each 32-bit value is put together
from the one or two aligned words that hold it. (On the H200 this made a Q4_K_M layer-step 2-5 % faster: the byte
loads were not what bound it; bench/results/2026-12-02-prefill-2.)

Shape legend: BN matrix rows of the tile; the tile's 256 elements in element order (e = 0 .. 255) come from
dimensions that name where each element sits in its block (see each function)."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def half_to_float(bits):
    """The low 16 bits of uint32 `bits` as an f16 -> float32."""
    return (bits & 0xFFFF).to(tl.uint16).to(tl.float16, bitcast=True).to(tl.float32)


@triton.jit
def u32_at(words, o, ok):
    """The little-endian 32 bits at even byte offsets o (int64) of the uint32 array `words`, from the aligned
    word(s) that hold them: one load where o is a multiple of 4, two otherwise (never a word holding none of them,
    so never past the end of the array)."""
    q = o >> 2
    odd = (o & 3) != 0
    lo = tl.load(words + q, mask=ok, other=0)
    hi = tl.load(words + q + 1, mask=ok & odd, other=0)
    return tl.where(odd, (lo >> 16) | (hi << 16), lo)


@triton.jit
def q4k_tile(words, row_word, n_ok, t, BN: tl.constexpr):
    """Tile t of the Q4_K rows whose first words are row_word [BN] (int64) -> float32 [BN, 256].
    Element e = 64 c + 32 hi + 4 w + i: nibble hi of byte i of word w of the block's 32-byte chunk c (qs starts
    at word 4), scaled by sub-block g = 2 c + hi's 6-bit scale and min (12 bytes at words 1-3)."""
    c = tl.arange(0, 4)[None, :, None, None, None]
    hi = tl.arange(0, 2)[None, None, :, None, None]
    w = tl.arange(0, 8)[None, None, None, :, None]
    i = tl.arange(0, 4)[None, None, None, None, :]
    block = words + (row_word + t * 36)[:, None, None, None, None]  # [BN, 1, 1, 1, 1]
    ok = n_ok[:, None, None, None, None]
    head = tl.load(block, mask=ok, other=0)  # d | dmin << 16
    s0 = tl.load(block + 1, mask=ok, other=0)  # scale bytes 0-3
    s1 = tl.load(block + 2, mask=ok, other=0)  # 4-7
    s2 = tl.load(block + 3, mask=ok, other=0)  # 8-11
    g = 2 * c + hi  # [1, 4, 2, 1, 1]
    shift = (g % 4) * 8
    low = g < 4
    a = (tl.where(low, s0, s1) >> shift) & 255  # scale byte g
    b = (tl.where(low, s1, s2) >> shift) & 255  # byte g + 4
    below = (s0 >> shift) & 255  # byte g - 4 (for g >= 4)
    sc = tl.where(low, a & 63, (b & 15) | ((below >> 6) << 4))
    mn = tl.where(low, b & 63, (b >> 4) | ((a >> 6) << 4))
    qs = tl.load(block + 4 + c * 8 + w, mask=ok, other=0)  # [BN, 4, 1, 8, 1]
    q = (qs >> (8 * i + 4 * hi)) & 15  # [BN, 4, 2, 8, 4]
    v = (half_to_float(head) * sc.to(tl.float32)) * q.to(tl.float32) - half_to_float(head >> 16) * mn.to(tl.float32)
    return tl.reshape(v, (BN, 256))


@triton.jit
def q6k_tile(words, row_byte, n_ok, t, BN: tl.constexpr):
    """Tile t of the Q6_K rows whose first bytes are at even offsets row_byte [BN] (int64) of `words` -> float32
    [BN, 256]. Element e = 128 h + 32 s + 4 w + i (s = 2 s_hi + s_lo): the low four bits are nibble s_hi of byte i
    of ql word 16 h + 8 s_lo + w, the high two bits 2 s of byte i of qh word 32 + 8 h + w; the int8 scale of
    16-element group e // 16 sits at byte 192 + e // 16, the f16 d at byte 208."""
    h = tl.arange(0, 2)[None, :, None, None, None, None]
    s_hi = tl.arange(0, 2)[None, None, :, None, None, None]
    s_lo = tl.arange(0, 2)[None, None, None, :, None, None]
    w = tl.arange(0, 8)[None, None, None, None, :, None]
    i = tl.arange(0, 4)[None, None, None, None, None, :]
    block = (row_byte + t * 210)[:, None, None, None, None, None]  # [BN, 1, 1, 1, 1, 1] byte offsets
    ok = n_ok[:, None, None, None, None, None]
    ql = u32_at(words, block + (h * 16 + s_lo * 8 + w) * 4, ok)  # [BN, 2, 1, 2, 8, 1]
    qh = u32_at(words, block + 128 + (h * 8 + w) * 4, ok)  # [BN, 2, 1, 1, 8, 1]
    s = 2 * s_hi + s_lo
    low = (ql >> (8 * i + 4 * s_hi)) & 15
    high = (qh >> (8 * i + 2 * s)) & 3
    q = tl.reshape((low | (high << 4)).to(tl.int32) - 32, (BN, 2, 2, 2, 2, 16))  # last: 16 elements of a group
    group = h * 8 + 2 * s + tl.arange(0, 2)[None, None, None, None, :, None]  # [1, 2, 2, 2, 2, 1]
    byte = u32_at(words, block + 192 + (group // 4) * 4, ok) >> ((group % 4) * 8)
    scale = ((byte & 255).to(tl.int32) ^ 128) - 128  # the signed int8
    d_at = block + 208  # d's two bytes lie in the aligned word that holds byte 208
    d = half_to_float(tl.load(words + (d_at >> 2), mask=ok, other=0) >> ((d_at & 3) * 8))
    v = (d * scale.to(tl.float32)) * q.to(tl.float32)
    return tl.reshape(v, (BN, 256))
