"""Wisp's engine on llama.cpp-quantized GGUF files on CUDA (`pytest -m gpu tests/gpu/test_gguf_engine.py`): for
every quant type Wisp runs (and a GLM-4.5-shaped Q4_K_M file), token ids and logprobs are bitwise identical resident, static, paged at top_k /
top_k + 1 / all slots and under a budget (graphs decode path, the default), the budget run's peak device memory
stays within the budget, and greedy tokens start as the CPU's fp32 run does (a peaked model, so bf16 rounding
cannot flip them)."""

import gc

import pytest
import torch

from tests.gguf.engine_runs import mode_options, outputs
from tests.gguf.peaked import greedy_files  # noqa: F401 (the fixture)

pytestmark = pytest.mark.gpu
FILE_TYPES = ("Q8_0", "Q4_K_M", "Q5_K_M", "Q6_K", "Q3_K_M", "Q2_K", "IQ4_XS")
CASES = [("qwen3_moe", ftype) for ftype in FILE_TYPES] + [("glm4_moe", "Q4_K_M")]
FIRST_TOKENS = 4


@pytest.fixture(scope="module")
def cuda():
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    return torch.device("cuda")


@pytest.mark.parametrize("model_type,ftype", CASES)
def test_every_expert_mode_is_bitwise_resident_on_cuda(cuda, model_type, ftype, greedy_files):
    path = greedy_files.quantized(model_type, ftype)
    reference = outputs(path, max_tokens=12, device="cuda", experts="resident")
    for name, options in mode_options(path, dtype_bytes=2, dense_in_blocks=True).items():  # auto on CUDA
        gc.collect()
        peak = []
        assert outputs(path, max_tokens=12, device="cuda", peak=peak, **options) == reference, name
        if options.get("budget_bytes"):
            assert peak[0] <= options["budget_bytes"], (name, peak[0], options["budget_bytes"])
    cpu = outputs(path, max_tokens=FIRST_TOKENS, device="cpu", experts="resident")
    assert cpu[0][0] == reference[0][0][:FIRST_TOKENS]  # greedy, first prompt
