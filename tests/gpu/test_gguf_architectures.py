"""GGUF files of GLM-4.7-Flash (deepseek2), LFM2-MoE (lfm2moe), Gemma 4 (gemma4) and Nemotron-H (nemotron_h_moe),
quantized Q4_K_M by llama.cpp's own quantizer, on CUDA (`pytest -m gpu tests/gpu/test_gguf_architectures.py`): token
ids and logprobs are bitwise identical resident, static, paged at top_k / top_k + 1 / all slots and under a budget,
and the budget run's peak device memory stays within the budget. Files made beforehand where the GPU machine has no
llama.cpp: WISP_GGUF_DIR/models/{glm4_moe_lite,lfm2_moe,gemma4_text,nemotron_h}-Q4_K_M.gguf (tests/gguf/conftest.py's
GgufFiles)."""

import os
from pathlib import Path

import pytest

from tests.gguf.conftest import GgufFiles
from tests.gguf.engine_runs import assert_every_mode_is_bitwise_resident_on_cuda

pytestmark = pytest.mark.gpu
MODEL_TYPES = ["glm4_moe_lite", "lfm2_moe", "gemma4_text", "nemotron_h"]


@pytest.fixture(scope="session")
def files(run_artifact) -> GgufFiles:
    made = os.environ.get("WISP_GGUF_DIR")
    return GgufFiles(Path(made) / "models" if made else run_artifact("gguf-models", lambda folder: None))


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_every_expert_mode_is_bitwise_resident_on_cuda(model_type, files):
    assert_every_mode_is_bitwise_resident_on_cuda(files.quantized(model_type, "Q4_K_M"))
