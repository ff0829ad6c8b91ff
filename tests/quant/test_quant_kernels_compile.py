"""The block-type kernels compile for sm_90 without a GPU (what Triton's interpreter does not check: types, the
tile's branches as the compiler sees them): the dequantize kernel, the byte GEMV and the grouped GEMM's down kernel
(quant_matmul's) for the low-bit types. Triton compiles outside its interpreter, in a process of its own."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from engine.system.triton_support import HAS_TRITON

TYPES = ("Q3_K", "Q2_K", "IQ4_NL", "IQ4_XS")


def compile_for_sm90(names=TYPES) -> None:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from engine.quant.grouped_kernels import grouped_down
    from engine.quant.triton_kernels import TYPE_CODE, dequantize, gathered_gemv, tile_shape
    from engine.quant.types import quant_type

    def ptx(fn, signature: dict, constexprs: dict) -> str:
        signature = dict(signature, **{name: "constexpr" for name in constexprs})
        source = ASTSource(fn=fn, signature=signature, constexprs=constexprs)
        options = dict(num_warps=4, enable_fp_fusion=False)
        return triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options).asm["ptx"]

    for name in names:
        qtype = quant_type(name)
        g, l = tile_shape(qtype)
        shape = {"QTYPE": TYPE_CODE[qtype], "G": g, "L": l}
        compiled = [
            ptx(dequantize, {"src_ptr": "*u8", "out_ptr": "*bf16", "N": "i32", "K": "i32", "row_bytes": "i32"},
                dict(shape, BN=4)),
            ptx(gathered_gemv, {"x_ptr": "*bf16", "table_ptr": "*u8", "rows_ptr": "*i64", "out_ptr": "*bf16",
                                "slot_bytes": "i64", "offset": "i64", "row_bytes": "i64", "N": "i32", "K": "i32",
                                "x_stride": "i32", "x_div": "i32"}, dict(shape, GLU=True, BN=4)),
            ptx(grouped_down, {"h_ptr": "*bf16", "table_ptr": "*u8", "tiles_ptr": "*i32", "out_ptr": "*bf16",
                               "weights_ptr": "*fp32", "bias_ptr": "*bf16", "slot_bytes": "i64",
                               "down_offset": "i64", "row_bytes": "i64", "N": "i32", "K": "i32"},
                {"DOWN_TYPE": TYPE_CODE[qtype], "G": g, "L": l, "HAS_BIAS": False, "IEEE": False, "WORDS": False,
                 "EVEN_K": True, "BM": 64, "BN": 64, "SWAP": False}),
        ]
        assert all(code.count(".entry") == 1 for code in compiled), name


@pytest.mark.skipif(not HAS_TRITON, reason="needs Triton")
def test_the_low_bit_tiles_compile_for_cuda():
    env = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    script = "from tests.quant.test_quant_kernels_compile import compile_for_sm90; compile_for_sm90()"
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
