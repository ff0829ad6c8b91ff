"""The hybrid linear-attention GGUF files (llama.cpp's qwen3next and qwen35moe, quantized by llama.cpp's own
quantizer) on CUDA (`pytest -m gpu tests/gpu/test_hybrid_gguf.py`): token ids and logprobs are bitwise identical
resident, static, paged at top_k / top_k + 1 / all slots and under a budget, and the budget run's peak device memory
stays within the budget. Files made beforehand where the GPU machine has no llama.cpp: WISP_GGUF_DIR/peak50/
{qwen3_next-Q4_K_M,qwen3_5_moe-Q8_0}.gguf (tests/gguf/peaked.py)."""

import pytest

from tests.gguf.engine_runs import assert_every_mode_is_bitwise_resident_on_cuda
from tests.gguf.peaked import greedy_files  # noqa: F401 (the fixture)

pytestmark = pytest.mark.gpu
CASES = [("qwen3_next", "Q4_K_M"), ("qwen3_5_moe", "Q8_0")]


@pytest.mark.parametrize("model_type,ftype", CASES)
def test_every_expert_mode_is_bitwise_resident_on_cuda(model_type, ftype, greedy_files):
    assert_every_mode_is_bitwise_resident_on_cuda(greedy_files.quantized(model_type, ftype))
