"""A llama.cpp Q4_K_M file whose expert rows fell back to Q5_0 and Q8_0 (tests/gguf/fallback_files.py) on CUDA
(`pytest -m gpu tests/gpu/test_fallback_types_gguf.py`): token ids and logprobs are bitwise identical resident,
static, paged at top_k / top_k + 1 / all slots and under a budget, and the budget run's peak device memory stays
within the budget. Files made beforehand where the GPU machine has no llama.cpp: WISP_GGUF_DIR/fallback/
qwen3_moe-{Q4_K_M,Q5_K_M,IQ4_XS}.gguf."""

import pytest

from tests.gguf.engine_runs import assert_every_mode_is_bitwise_resident_on_cuda
from tests.gguf.fallback_files import FALLBACK, fallback_files  # noqa: F401 (the fixture)

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("ftype", FALLBACK)
def test_every_expert_mode_is_bitwise_resident_on_cuda(fallback_files, ftype):
    assert_every_mode_is_bitwise_resident_on_cuda(fallback_files.quantized("qwen3_moe", ftype))
