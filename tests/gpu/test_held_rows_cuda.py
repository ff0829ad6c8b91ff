"""Held rows on CUDA graphs (`pytest -m gpu tests/gpu/test_held_rows_cuda.py`): once every expert is paged in (engine.experts.pager.held_rows),
a paged engine whose every layer holds every expert gives resident mode's tokens and logprobs bit for bit, for a
plain and a hybrid model, alone and in a batch, overlapped steps included."""

from __future__ import annotations

import pytest
import torch

from engine.model.loader import read_args
from tests.gpu.test_overlap import run
from tests.tiny_models import write_tiny_model

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", ["qwen3_moe", "qwen3_5_moe"])
def test_held_rows_give_resident_bits_on_cuda(tmp_path, name):
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    folder = write_tiny_model(tmp_path / name, name, dtype=torch.bfloat16)
    args = read_args(folder)
    reference, _ = run(folder, overlap=True)
    held, ahead = run(folder, overlap=True, experts="paged", expert_slots=args.num_experts)
    assert held == reference
