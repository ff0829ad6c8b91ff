"""The draft layer's drafts after a proposal's first as CUDA graph replays (engine.generation.speculative.
draft_graphs), on the lent GPU: `pytest -m gpu -p no:xdist tests/gpu/test_mtp_draft_graphs_gpu.py`. In every proposal
the graphed drafts equal the eager ones token for token, on the tiny MTP models in fp32 and bf16 and every expert
mode; the greedy ids with the graphed drafter equal those of --speculative off; one graph serves every sequence."""

from __future__ import annotations

import pytest
import torch

from engine.model.loader import read_args
from tests.experts.test_expert_modes import mode_options
from tests.mtp_checkpoints import MTP_TYPES, write_mtp_model
from tests.runtime.test_mtp_draft_steps import assert_static_drafts_equal_eager, run_compared
from tests.tiny_models import write_tiny_model

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("model_type", MTP_TYPES)
def test_graphed_drafts_equal_eager_drafts_in_every_expert_mode(tmp_path, model_type, dtype):
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    tiny = write_tiny_model(tmp_path / "tiny", model_type, dtype=dtype)
    folder = write_mtp_model(tiny, tmp_path / "mtp", model_type)
    args = read_args(folder)
    plain, _, _ = run_compared(folder, "cuda", True, speculative="off", decode="graphs")
    for mode, options in {"resident": {}, **mode_options(args.num_experts_per_tok, args.num_experts)}.items():
        drafted, pairs, steps = run_compared(folder, "cuda", True, decode="graphs", **options)
        assert_static_drafts_equal_eager(pairs)
        assert steps.captures == 1, mode  # captured once, replayed for every sequence after
        assert drafted == plain, mode
