"""The full sampling API on CUDA (H200: `pytest -m gpu tests/gpu/test_sampling_cuda.py`): a seeded request with
penalties, logit_bias, min_p, top_k, top_logprobs and a JSON schema gives bitwise the same tokens, logprobs and
alternatives in every expert mode, with CUDA-graph decode, and beside a batch."""

from __future__ import annotations

import pytest
import torch

from engine.model.loader import read_args
from tests.experts.test_expert_modes import mode_options
from tests.generation.test_sampling_modes import outputs
from tests.tiny_models import write_tiny_model

pytestmark = pytest.mark.gpu


def test_full_sampling_is_bitwise_equal_in_every_expert_mode_on_cuda(tmp_path):
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    folder = write_tiny_model(tmp_path / "qwen3_moe", "qwen3_moe", dtype=torch.bfloat16)
    args = read_args(folder)
    reference = outputs(folder, device="cuda", experts="resident")
    assert outputs(folder, device="cuda", experts="resident", decode="graphs") == reference
    for name, options in mode_options(args.num_experts_per_tok, args.num_experts).items():
        assert outputs(folder, device="cuda", **options) == reference, name
        assert outputs(folder, device="cuda", decode="graphs", **options) == reference, f"{name}, graphs"
