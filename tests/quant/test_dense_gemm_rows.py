"""Which long steps run the dense GEMM that dequantizes inside its K loop (engine.quant.quant_matmul.runs_fused): on
CUDA with Triton, steps of at most AUTO_MAX_ROWS rows; never on the CPU."""

import pytest
import torch

from engine.quant import quant_matmul as qm
from engine.quant.linear import QuantLinearSpec
from engine.quant.types import Q4_K


class FakeCuda:
    """The attributes runs_fused reads of x, on a CUDA device, without a GPU."""

    def __init__(self, rows: int):
        self.shape, self.dtype, self.device = (rows, 256), torch.bfloat16, torch.device("cuda")


SPEC = QuantLinearSpec(Q4_K, 512, 256)


@pytest.fixture(autouse=True)
def with_triton(monkeypatch):
    monkeypatch.setattr(qm, "HAS_TRITON", True)


@pytest.mark.parametrize("rows, fused", [(1, True), (512, True), (qm.AUTO_MAX_ROWS, True),
                                         (qm.AUTO_MAX_ROWS + 1, False), (8192, False)])
def test_the_row_count_picks(rows, fused):
    assert qm.runs_fused(FakeCuda(rows), SPEC) is fused


def test_the_cpu_never_runs_it():
    assert not qm.runs_fused(torch.zeros(16, 256, dtype=torch.bfloat16), SPEC)
