"""Dequantization in plain torch ops, on any device: the reference the Triton kernels are tested against and the
CPU path. Each type follows the `gguf` package's numpy code operation for operation (float32, every product and
difference rounded on its own), so the results are bit-exact against `gguf.quants.dequantize`."""

from __future__ import annotations

import torch

from engine.quant.types import (BF16, F16, F32, IQ4_NL, IQ4_XS, MXFP4, Q2_K, Q3_K, Q4_0, Q4_1, Q4_K, Q5_0, Q5_1, Q5_K,
                               Q6_K, Q8_0, QuantType, quant_type)


def dequantize_reference(raw: torch.Tensor, kind) -> torch.Tensor:
    """raw uint8 [..., row_bytes] of whole blocks -> float32 [..., row_elements]."""
    qtype = quant_type(kind)
    raw = raw.contiguous()
    if raw.dtype != torch.uint8 or raw.shape[-1] % qtype.block_bytes:
        raise ValueError(f"{qtype.name} data must be uint8 rows of whole {qtype.block_bytes}-byte blocks, "
                         f"got {raw.dtype} {tuple(raw.shape)}")
    blocks = raw.reshape(-1, qtype.block_bytes)  # [n, block_bytes]
    values = _DEQUANTIZE[qtype](blocks)  # [n, block_size]
    return values.reshape(*raw.shape[:-1], raw.shape[-1] // qtype.block_bytes * qtype.block_size)


def _f16(two_bytes: torch.Tensor) -> torch.Tensor:
    """[n, 2] little-endian f16 bytes -> float32 [n, 1]."""
    return two_bytes.contiguous().view(torch.float16).float()


def _shifts(values, blocks: torch.Tensor) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.uint8, device=blocks.device)


def _f32(blocks: torch.Tensor) -> torch.Tensor:
    return blocks.view(torch.float32).clone()


def _f16_values(blocks: torch.Tensor) -> torch.Tensor:
    return blocks.view(torch.float16).float()


def _bf16_values(blocks: torch.Tensor) -> torch.Tensor:
    return (blocks.view(torch.int16).to(torch.int32) << 16).view(torch.float32)


def _q8_0(blocks: torch.Tensor) -> torch.Tensor:
    d = _f16(blocks[:, :2])  # [n, 1]
    return blocks[:, 2:].view(torch.int8).float() * d


def scale_min_k4(scales: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The 12 packed bytes of a Q4_K/Q5_K block -> 8 six-bit scales and 8 six-bit mins, [n, 8] uint8 each."""
    s = scales.reshape(-1, 3, 4)
    d, m, m_d = s[:, 0], s[:, 1], s[:, 2]
    sc = torch.cat([d & 0x3F, (m_d & 0x0F) | ((d >> 2) & 0x30)], dim=-1)
    mins = torch.cat([m & 0x3F, (m_d >> 4) | ((m >> 2) & 0x30)], dim=-1)
    return sc, mins


def _k4_scales(blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """-> (d * scale, dmin * min), float32 [n, 8, 1] each."""
    n = blocks.shape[0]
    sc, mins = scale_min_k4(blocks[:, 4:16])
    d = (_f16(blocks[:, 0:2]) * sc.float()).reshape(n, 8, 1)
    dm = (_f16(blocks[:, 2:4]) * mins.float()).reshape(n, 8, 1)
    return d, dm


def _low_nibbles_k4(qs: torch.Tensor) -> torch.Tensor:
    """128 bytes -> [n, 8, 32]: sub-block 2c is byte 32c + l's low nibble, 2c + 1 its high nibble."""
    n = qs.shape[0]
    shifted = qs.reshape(n, 4, 1, 32) >> _shifts([0, 4], qs).reshape(1, 1, 2, 1)
    return (shifted & 0x0F).reshape(n, 8, 32)


def _q4_k(blocks: torch.Tensor) -> torch.Tensor:
    d, dm = _k4_scales(blocks)
    q = _low_nibbles_k4(blocks[:, 16:]).float()  # [n, 8, 32]
    return (d * q - dm).reshape(-1, 256)


def _q5_k(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    d, dm = _k4_scales(blocks)
    low = _low_nibbles_k4(blocks[:, 48:])
    high = (blocks[:, 16:48].reshape(n, 1, 1, 32) >> _shifts(range(8), blocks).reshape(1, 1, 8, 1)) & 0x01
    q = (low | (high.reshape(n, 8, 32) << 4)).float()
    return (d * q - dm).reshape(-1, 256)


def _q6_k(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    scales = blocks[:, 192:208].view(torch.int8).float()  # [n, 16]
    d = (_f16(blocks[:, 208:210]) * scales).reshape(n, 16, 1)
    low = blocks[:, :128].reshape(n, 2, 1, 64) >> _shifts([0, 4], blocks).reshape(1, 1, 2, 1)
    low = (low & 0x0F).reshape(n, 8, 32)
    high = blocks[:, 128:192].reshape(n, 2, 1, 32) >> _shifts([0, 2, 4, 6], blocks).reshape(1, 1, 4, 1)
    high = (high & 0x03).reshape(n, 8, 32)
    q = (low | (high << 4)).to(torch.int8) - 32
    return (d * q.reshape(n, 16, 16).float()).reshape(-1, 256)


def e8m0_half(e: torch.Tensor) -> torch.Tensor:
    """E8M0 scale bytes [n, 1] -> float32 2^(e - 128), half the scale: ggml's ggml_e8m0_to_fp32_half, whose
    e < 2 are the subnormals 2^-128 and 2^-127."""
    e = e.to(torch.int32)
    bits = torch.where(e < 2, 0x00200000 << e, (e - 1) << 23)
    return bits.view(torch.float32)


E2M1_DOUBLED = (0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12)  # twice the e2m1 values, by nibble


def _mxfp4(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    nibbles = (blocks[:, 1:].reshape(n, 1, 16) >> _shifts([0, 4], blocks).reshape(1, 2, 1)) & 0x0F  # [n, 2, 16]
    values = torch.tensor(E2M1_DOUBLED, dtype=torch.float32, device=blocks.device)[nibbles.long()]
    return e8m0_half(blocks[:, :1]) * values.reshape(n, 32)  # exact: a power of two times a small integer


def _nibbles_32(qs: torch.Tensor) -> torch.Tensor:
    """16 bytes -> [n, 32] uint8: element j < 16 is byte j's low nibble, j + 16 its high nibble."""
    n = qs.shape[0]
    return ((qs.reshape(n, 1, 16) >> _shifts([0, 4], qs).reshape(1, 2, 1)) & 0x0F).reshape(n, 32)


def _fifth_bits(qh: torch.Tensor) -> torch.Tensor:
    """4 bytes (a little-endian uint32) -> [n, 32] uint8: bit j is element j's fifth bit."""
    n = qh.shape[0]
    return ((qh.reshape(n, 4, 1) >> _shifts(range(8), qh).reshape(1, 1, 8)) & 0x01).reshape(n, 32)


def _q4_0(blocks: torch.Tensor) -> torch.Tensor:
    q = _nibbles_32(blocks[:, 2:]).to(torch.int8) - 8
    return _f16(blocks[:, :2]) * q.float()


def _q4_1(blocks: torch.Tensor) -> torch.Tensor:
    q = _nibbles_32(blocks[:, 4:]).float()
    return _f16(blocks[:, :2]) * q + _f16(blocks[:, 2:4])


def _q5_0(blocks: torch.Tensor) -> torch.Tensor:
    q = (_nibbles_32(blocks[:, 6:]) | (_fifth_bits(blocks[:, 2:6]) << 4)).to(torch.int8) - 16
    return _f16(blocks[:, :2]) * q.float()


def _q5_1(blocks: torch.Tensor) -> torch.Tensor:
    q = (_nibbles_32(blocks[:, 8:]) | (_fifth_bits(blocks[:, 4:8]) << 4)).float()
    return _f16(blocks[:, :2]) * q + _f16(blocks[:, 2:4])


def _two_bit_lows(qs: torch.Tensor) -> torch.Tensor:
    """64 bytes -> [n, 16, 16] uint8: element e is bits 2s, 2s + 1 of byte 32 h + e % 32, h = e // 128 and
    s = e % 128 // 32 (Q2_K's values, Q3_K's low bits)."""
    n = qs.shape[0]
    return ((qs.reshape(n, 2, 1, 32) >> _shifts([0, 2, 4, 6], qs).reshape(1, 1, 4, 1)) & 0x03).reshape(n, 16, 16)


def _q2_k(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    scales = blocks[:, :16]
    d = (_f16(blocks[:, 80:82]) * (scales & 0x0F).float()).reshape(n, 16, 1)
    dm = (_f16(blocks[:, 82:84]) * (scales >> 4).float()).reshape(n, 16, 1)
    return (d * _two_bit_lows(blocks[:, 16:80]).float() - dm).reshape(-1, 256)


def _q3_k_scales(scales: torch.Tensor) -> torch.Tensor:
    """12 bytes -> [n, 16] float32 signed 6-bit scales: scale i's low nibble is byte i % 8's (high nibble for
    i >= 8), its top two bits are bits 2 (i // 4), +1 of byte 8 + i % 4."""
    n = scales.shape[0]
    low = (scales[:, :8].reshape(n, 1, 8) >> _shifts([0, 4], scales).reshape(1, 2, 1)).reshape(n, 16) & 0x0F
    high = (scales[:, 8:].reshape(n, 1, 4) >> _shifts([0, 2, 4, 6], scales).reshape(1, 4, 1)).reshape(n, 16) & 0x03
    return ((low | (high << 4)).to(torch.int8) - 32).float()


def _q3_k(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    d = (_f16(blocks[:, 108:110]) * _q3_k_scales(blocks[:, 96:108])).reshape(n, 16, 1)
    high = (blocks[:, :32].reshape(n, 1, 32) >> _shifts(range(8), blocks).reshape(1, 8, 1)) & 0x01  # [n, 8, 32]
    q = _two_bit_lows(blocks[:, 32:96]).to(torch.int8) - ((high.reshape(n, 16, 16) ^ 1) << 2).to(torch.int8)
    return (d * q.float()).reshape(-1, 256)  # a clear third bit subtracts 4


IQ4_VALUES = (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113)  # ggml's kvalues_iq4nl


def _iq4_values(nibbles: torch.Tensor) -> torch.Tensor:
    return torch.tensor(IQ4_VALUES, dtype=torch.float32, device=nibbles.device)[nibbles.long()]


def _iq4_nl(blocks: torch.Tensor) -> torch.Tensor:
    return _f16(blocks[:, :2]) * _iq4_values(_nibbles_32(blocks[:, 2:]))


def _iq4_xs_scales(blocks: torch.Tensor) -> torch.Tensor:
    """-> [n, 8] float32 signed 6-bit scales: scale j's low nibble from byte 4 + j // 2, its top two bits are bits
    2j, 2j + 1 of the little-endian uint16 at bytes 2-3."""
    n = blocks.shape[0]
    low = (blocks[:, 4:8].reshape(n, 4, 1) >> _shifts([0, 4], blocks).reshape(1, 1, 2)).reshape(n, 8) & 0x0F
    top = blocks[:, 2:4].to(torch.int32)
    top = (top[:, :1] | (top[:, 1:] << 8)) >> torch.arange(0, 16, 2, device=blocks.device).reshape(1, 8)
    return ((low | ((top & 0x03).to(torch.uint8) << 4)).to(torch.int8) - 32).float()


def _iq4_xs(blocks: torch.Tensor) -> torch.Tensor:
    n = blocks.shape[0]
    d = (_f16(blocks[:, :2]) * _iq4_xs_scales(blocks)).reshape(n, 8, 1)
    q = _nibbles_32(blocks[:, 8:].reshape(n * 8, 16)).reshape(n, 8, 32)
    return (d * _iq4_values(q)).reshape(-1, 256)


_DEQUANTIZE: dict[QuantType, object] = {F32: _f32, F16: _f16_values, BF16: _bf16_values, Q8_0: _q8_0,
                                        Q4_K: _q4_k, Q5_K: _q5_k, Q6_K: _q6_k, MXFP4: _mxfp4, Q4_0: _q4_0,
                                        Q4_1: _q4_1, Q5_0: _q5_0, Q5_1: _q5_1, Q3_K: _q3_k, Q2_K: _q2_k,
                                        IQ4_NL: _iq4_nl, IQ4_XS: _iq4_xs}
