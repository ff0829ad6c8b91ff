"""GGUF files of GLM-4.7-Flash (deepseek2), LFM2-MoE (lfm2moe), Gemma 4 (gemma4) and Nemotron-H (nemotron_h_moe),
quantized Q4_K_M by llama.cpp's own quantizer, on CUDA (`pytest -m gpu tests/gpu/test_gguf_architectures.py`): token
ids and logprobs are bitwise identical resident, static, paged at top_k / top_k + 1 / all slots and under a budget,
and the budget run's peak device memory stays within the budget. Files made beforehand where the GPU machine has no
llama.cpp: WISP_GGUF_DIR/models/{glm4_moe_lite,lfm2_moe,gemma4_text,nemotron_h}-Q4_K_M.gguf (tests/gguf/conftest.py's
GgufFiles)."""

import gc
import os
from pathlib import Path

import pytest
import torch

from tests.gguf.conftest import GgufFiles
from tests.gguf.engine_runs import mode_options, outputs

pytestmark = pytest.mark.gpu
MODEL_TYPES = ["glm4_moe_lite", "lfm2_moe", "gemma4_text", "nemotron_h"]


@pytest.fixture(scope="session")
def files(run_artifact) -> GgufFiles:
    made = os.environ.get("WISP_GGUF_DIR")
    return GgufFiles(Path(made) / "models" if made else run_artifact("gguf-models", lambda folder: None))


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_every_expert_mode_is_bitwise_resident_on_cuda(model_type, files):
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    path = files.quantized(model_type, "Q4_K_M")
    reference = outputs(path, max_tokens=12, device="cuda", experts="resident")
    assert len({ids for ids, _ in reference}) > 1
    for name, options in mode_options(path, dtype_bytes=2).items():
        gc.collect()
        peak = []
        assert outputs(path, max_tokens=12, device="cuda", peak=peak, **options) == reference, name
        if options.get("budget_bytes"):
            assert peak[0] <= options["budget_bytes"], (name, peak[0], options["budget_bytes"])
