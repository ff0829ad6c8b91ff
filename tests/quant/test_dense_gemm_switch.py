"""Which long steps run the dense GEMM that dequantizes inside its K loop (engine.quant.quant_matmul.runs_fused): on
CUDA with Triton, by the step's row count under WISP_DENSE_GEMM; never on the CPU."""

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


@pytest.mark.parametrize("switch, rows, fused", [(None, qm.AUTO_MAX_ROWS, True), (None, qm.AUTO_MAX_ROWS + 1, False),
                                                 ("auto", 512, True), ("1", 8192, True), ("0", 512, False)])
def test_the_switch_picks_by_row_count(monkeypatch, switch, rows, fused):
    if switch is None:
        monkeypatch.delenv(qm.SWITCH, raising=False)
    else:
        monkeypatch.setenv(qm.SWITCH, switch)
    assert qm.runs_fused(FakeCuda(rows), SPEC) is fused


def test_the_cpu_never_runs_it(monkeypatch):
    monkeypatch.setenv(qm.SWITCH, "1")
    assert not qm.runs_fused(torch.zeros(16, 256, dtype=torch.bfloat16), SPEC)


def test_an_unknown_switch_value_says_what_it_takes(monkeypatch):
    monkeypatch.setenv(qm.SWITCH, "yes")
    with pytest.raises(ValueError, match="expected 0, 1 or auto"):
        qm.runs_fused(FakeCuda(512), SPEC)
