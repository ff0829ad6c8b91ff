"""The host tier on CUDA (`pytest -m gpu tests/gpu/test_host_tier_cuda.py`): with host RAM capped below the
experts' bytes, misses on rows left in the file are read into pinned staging rows and copied on the copy stream;
token ids and logprobs are bitwise those of the uncapped run (a llama.cpp Q4_K_M file, rows padded, and a
safetensors checkpoint), and page-cache reads are counted."""

import pytest
import torch

from engine.alloc.host_tier import STAGING_ROWS, staging_rows
from engine.quant.gguf_store import quant_layout_of
from tests.gguf.peaked import greedy_files  # noqa: F401 (the fixture)
from tests.gguf.test_host_tier import experts_of, generate

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cuda():
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    return torch.device("cuda")


@pytest.mark.parametrize("slots", [2, 4])
def test_capped_host_ram_is_bitwise_uncapped_on_cuda_gguf(cuda, greedy_files, slots):
    path = greedy_files.quantized("qwen3_moe", "Q4_K_M")
    experts = experts_of(path)
    row, num_experts = quant_layout_of(experts).expert_bytes, next(iter(experts.values())).gate.shape[0]
    reference, full = generate(path, device="cuda", max_tokens=10, expert_slots=slots)
    capped, stats = generate(path, device="cuda", max_tokens=10, expert_slots=slots,
                             host_budget_bytes=(staging_rows(num_experts) + 2) * row)
    assert capped == reference
    assert stats.host_mapped_bytes > 0 and stats.page_cache_reads > 0 and stats.page_cache_gb_per_s > 0
    assert full.page_cache_reads == 0


def test_capped_host_ram_is_bitwise_uncapped_on_cuda_safetensors(cuda, tiny_model_dir):
    from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
    from engine.model.config_file import read_args

    folder = tiny_model_dir("qwen3_moe")
    args = read_args(folder)
    row = 3 * args.hidden_size * args.moe_intermediate_size * 4  # the tiny checkpoint is fp32
    assert staging_rows(args.num_experts) == STAGING_ROWS

    def run(**options):
        request = GenerateRequest(prompt="def fib(n):", sampling=SamplingParams(max_tokens=16, ignore_eos=True))
        with Engine(EngineOptions(model=str(folder), device="cuda", experts="paged", expert_slots=2,
                                  **options)) as engine:
            result = engine.generate(request)
            pager = engine._core.runner.experts.host_pager
            return (result.token_ids, result.logprobs), engine.stats(), pager.rows.staging.rows

    reference, _, _ = run()
    capped, stats, staging = run(host_budget_bytes=(STAGING_ROWS + 3) * row)
    assert capped == reference and stats.page_cache_reads > 0
    assert staging is not None and staging.is_pinned()
