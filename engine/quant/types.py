"""The registry of GGUF tensor types Wisp's engine computes with: each QuantType is a storage format (ggml type id,
elements and bytes per block) and which of the engine's kernels read it. Every table of types the kernels and the
loaders use derives from SUPPORTED. Adding a block type is its entry here plus its kernels: the torch reference
(engine.quant.reference), the Triton dequantization and GEMM (engine.quant.triton_kernels and
engine.quant.grouped_kernels, by kernel_code) and, where its flags say so, a decode GEMV."""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import UnsupportedModelError


@dataclass(frozen=True)
class QuantType:
    """One ggml storage type: a row of `block_size * n` elements is n blocks of `block_bytes` bytes.

    kernel_code: the type's code in the Triton kernels (a constexpr they branch on; fixed once given).
    scale_group: elements per scale in a block (the Triton kernels' tile is TILE // scale_group rows of it).
    f16_scale_offsets: byte offsets of the block's f16 scales (random valid blocks set them, engine.quant.synthetic).
    word_gemv: engine.quant.gemv_kernels' word-wide decode GEMV reads it.
    wide_gemv: engine.quant.wide_gemv's wide-load decode GEMV reads it."""

    name: str
    ggml_id: int
    block_size: int
    block_bytes: int
    kernel_code: int
    scale_group: int = 32
    f16_scale_offsets: tuple[int, ...] = ()
    word_gemv: bool = False
    wide_gemv: bool = False

    @property
    def is_quantized(self) -> bool:
        """Blocks with scales (not plain floats): dense tensors of the type stay in their blocks on the device, and
        long steps through them run engine.quant.quant_matmul."""
        return self.block_size > 1

    def row_bytes(self, num_elements: int) -> int:
        """Bytes of a row of num_elements (a multiple of block_size)."""
        if num_elements % self.block_size:
            raise UnsupportedModelError(
                f"a {self.name} row of {num_elements} elements is not a whole number of {self.block_size}-element "
                "blocks; the file is malformed")
        return num_elements // self.block_size * self.block_bytes


QK_K = 256  # elements of a k-quant super-block
F32 = QuantType("F32", 0, 1, 4, kernel_code=0)
F16 = QuantType("F16", 1, 1, 2, kernel_code=1)
BF16 = QuantType("BF16", 30, 1, 2, kernel_code=2)
Q8_0 = QuantType("Q8_0", 8, 32, 34, kernel_code=3, f16_scale_offsets=(0,), word_gemv=True)  # d (f16), 32 int8
# d, dmin (f16), 12 bytes of 6-bit scales and mins, 128 bytes of nibbles
Q4_K = QuantType("Q4_K", 12, QK_K, 144, kernel_code=4, f16_scale_offsets=(0, 2), word_gemv=True, wide_gemv=True)
# as Q4_K plus 32 bytes of fifth bits
Q5_K = QuantType("Q5_K", 13, QK_K, 176, kernel_code=5, f16_scale_offsets=(0, 2), word_gemv=True, wide_gemv=True)
# 128 bytes low nibbles, 64 bytes high 2 bits, 16 int8 scales, d (f16)
Q6_K = QuantType("Q6_K", 14, QK_K, 210, kernel_code=6, scale_group=16, f16_scale_offsets=(208,), word_gemv=True,
                 wide_gemv=True)
# an E8M0 scale byte, 16 bytes of e2m1 nibbles (element j low, j + 16 high)
MXFP4 = QuantType("MXFP4", 39, 32, 17, kernel_code=7)
# The 32-element types llama.cpp's quantizer gives a row that is not whole 256-element super-blocks
# (engine.quant.file_types.fallback_type). Element j < 16 is byte j's low nibble, j + 16 its high one.
Q4_0 = QuantType("Q4_0", 2, 32, 18, kernel_code=8, f16_scale_offsets=(0,))  # d (f16), 16 bytes of nibbles
Q4_1 = QuantType("Q4_1", 3, 32, 20, kernel_code=9, f16_scale_offsets=(0, 2))  # d, m (f16), 16 bytes of nibbles
# d (f16), 4 bytes of fifth bits (bit j: element j), 16 bytes of nibbles
Q5_0 = QuantType("Q5_0", 6, 32, 22, kernel_code=10, f16_scale_offsets=(0,))
Q5_1 = QuantType("Q5_1", 7, 32, 24, kernel_code=11, f16_scale_offsets=(0, 2))  # d, m (f16), then as Q5_0
# The low-bit k-quants of Q3_K_M / Q3_K_S / Q2_K files, 16 scales of 16 elements each.
# 32 bytes of third bits (hmask), 64 bytes of 2-bit lows, 12 bytes of 6-bit scales, d (f16)
Q3_K = QuantType("Q3_K", 11, QK_K, 110, kernel_code=12, scale_group=16, f16_scale_offsets=(108,))
# 16 bytes of 4-bit scales (low nibble) and mins (high), 64 bytes of 2-bit values, d, dmin (f16)
Q2_K = QuantType("Q2_K", 10, QK_K, 84, kernel_code=13, scale_group=16, f16_scale_offsets=(80, 82))
# Nibbles that index a 16-entry non-linear table (kvalues_iq4nl), laid out as Q4_0's.
IQ4_NL = QuantType("IQ4_NL", 20, 32, 18, kernel_code=14, f16_scale_offsets=(0,))  # d (f16), 16 bytes of nibbles
# d (f16), 2 bytes of scales' top 2 bits, 4 bytes of their low nibbles, 8 x 16 bytes of IQ4_NL nibbles
IQ4_XS = QuantType("IQ4_XS", 23, QK_K, 136, kernel_code=15, f16_scale_offsets=(0,))

SUPPORTED = (F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K, MXFP4, Q4_0, Q4_1, Q5_0, Q5_1, Q3_K, Q2_K, IQ4_NL, IQ4_XS)
BLOCK_TYPES = tuple(t for t in SUPPORTED if t.is_quantized)
_BY_ID = {t.ggml_id: t for t in SUPPORTED}
_BY_NAME = {t.name: t for t in SUPPORTED}


def quant_type(kind: int | str | QuantType) -> QuantType:
    """A supported type from its ggml id, its name or itself; any other type is refused by name."""
    if isinstance(kind, QuantType):
        return kind
    found = _BY_ID.get(kind) if isinstance(kind, int) else _BY_NAME.get(str(kind).upper())
    if found is None:
        raise UnsupportedModelError(
            f"tensor type {_describe(kind)} is not supported by Wisp's engine (it runs "
            f"{', '.join(t.name for t in SUPPORTED)}); use --backend llama.cpp for this file")
    return found


def _describe(kind) -> str:
    if isinstance(kind, int):
        try:
            from gguf import GGMLQuantizationType

            return f"{GGMLQuantizationType(kind).name} (ggml type {kind})"
        except (ImportError, ValueError):
            return f"ggml type {kind}"
    return str(kind)


SLOT_ALIGN = 16  # bytes: slot rows and the matrices in them start on 16-byte words (the pager's copy kernels)


def align(nbytes: int) -> int:
    return -(-nbytes // SLOT_ALIGN) * SLOT_ALIGN


def slot_bytes(gate_bytes: int, up_bytes: int, down_bytes: int) -> int:
    """One quantized expert's slot row: gate, up and down each at an aligned offset, the row padded."""
    return align(align(align(gate_bytes) + up_bytes) + down_bytes)
