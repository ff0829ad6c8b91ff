"""The linear-attention state cache's row writes (engine.model.state_store), in Triton's interpreter on the CPU:
each row at its slot, nothing else touched."""

import pytest
import torch

from engine.model.state_store import BLOCK, store_rows


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_store_rows_writes_each_row_at_its_slot_and_nothing_else(dtype):
    pytest.importorskip("triton", reason="the row kernel needs Triton")  # installed by the test extra
    width = BLOCK + 37  # two column blocks, the second partial
    pool = torch.zeros(6, 1, width, dtype=dtype)
    rows = torch.randn(3, 1, width, dtype=dtype)
    slots = torch.tensor([4, 0, 2])
    store_rows(pool, slots, rows)
    assert torch.equal(pool[slots], rows)
    assert not pool[torch.tensor([1, 3, 5])].any()
