"""Generations of Wisp's engine on a GGUF file, shared by the CPU and CUDA tests: one prompt greedy and seeded, then
a batch of concurrent requests; the expert modes to compare; a budget just above the file's minimum."""

from __future__ import annotations

from pathlib import Path

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.gguf.model_file import GgufModel
from engine.gguf.sizes import gguf_model_sizes
from engine.alloc.memory_plan import minimum_budget

PROMPTS = [(5, 17, 99, 230, 41), (300, 12), (7, 8, 9, 10, 11, 12, 13, 14, 15), (250,)]
MAX_MODEL_LEN = 128


def sampling(max_tokens: int) -> tuple[SamplingParams, SamplingParams]:
    """(greedy, seeded) that run to max_tokens."""
    return (SamplingParams(max_tokens=max_tokens, ignore_eos=True),
            SamplingParams(max_tokens=max_tokens, temperature=0.9, top_p=0.9, seed=11, ignore_eos=True))


def outputs(path: Path, max_tokens: int = 6, device: str = "cpu", peak: list | None = None, **options) -> list:
    """(token ids, logprobs) of: the first prompt greedy, then seeded, then all PROMPTS batched (greedy and seeded
    alternating). peak: a list that receives the device memory this engine added at its most, over loading and the
    runs (CUDA): max_memory_allocated less what earlier engines of the process left allocated (cuBLAS workspaces of
    their streams, kept by torch for the process)."""
    greedy, seeded = sampling(max_tokens)
    engine_options = EngineOptions(model=str(path), device=device, backend="wisp", max_model_len=MAX_MODEL_LEN,
                                   **options)
    if peak is not None:
        import torch

        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        baseline = torch.cuda.memory_allocated()
    with Engine(engine_options) as engine:
        results = [engine.generate(GenerateRequest(prompt_token_ids=PROMPTS[0], sampling=s)) for s in (greedy, seeded)]
        handles = engine.submit_batch([GenerateRequest(prompt_token_ids=p, sampling=(greedy, seeded)[i % 2])
                                       for i, p in enumerate(PROMPTS)])
        results += [h.result() for h in handles]
        if peak is not None:
            peak.append(torch.cuda.max_memory_allocated() - baseline)
    assert all(r.error is None and len(r.token_ids) == max_tokens for r in results), results
    return [(tuple(r.token_ids), tuple(r.logprobs)) for r in results]


def small_budget(path: Path, dtype_bytes: int, dense_in_blocks: bool = False) -> int:
    """A budget one expert slot per MoE layer above the file's minimum (top_k slots), at MAX_MODEL_LEN; dense_in_blocks:
    the dense tensors held in their quant blocks (--dense-weights file, the default on CUDA)."""
    model = GgufModel(path)
    sizes = gguf_model_sizes(model, dtype_bytes, dense_in_blocks)
    request = EngineOptions(experts="paged", budget_bytes=1, max_model_len=MAX_MODEL_LEN).plan_request(
        model.args.max_position_embeddings)
    return minimum_budget(sizes, request) + sizes.num_moe_layers * sizes.expert_bytes


def mode_options(path: Path, dtype_bytes: int, dense_in_blocks: bool = False) -> dict[str, dict]:
    """Every expert mode but resident, with slots top_k, top_k + 1 and all experts, and a budget (small_budget)."""
    args = GgufModel(path).args
    top_k, experts = args.num_experts_per_tok, args.num_experts
    return {"static": dict(experts="static"),
            "paged-top_k": dict(experts="paged", expert_slots=top_k),
            "paged-top_k+1": dict(experts="paged", expert_slots=top_k + 1),
            "paged-all": dict(experts="paged", expert_slots=experts),
            "paged-budget": dict(experts="paged", budget_bytes=small_budget(path, dtype_bytes, dense_in_blocks))}


def assert_every_mode_is_bitwise_resident(path: Path) -> None:
    """On the CPU in fp32: every expert mode of mode_options gives resident's token ids and logprobs bit for bit."""
    reference = outputs(path, experts="resident")
    assert len({ids for ids, _ in reference}) > 1  # seeded, greedy and the prompts differ: a real comparison
    for name, options in mode_options(path, dtype_bytes=4).items():
        assert outputs(path, **options) == reference, name


def assert_every_mode_is_bitwise_resident_on_cuda(path: Path) -> None:
    """On CUDA in bf16: every expert mode of mode_options gives resident's token ids and logprobs bit for bit, and a
    budget run's peak device memory stays within its budget."""
    import gc

    import torch

    assert torch.cuda.is_available(), "GPU tests need CUDA"
    reference = outputs(path, max_tokens=12, device="cuda", experts="resident")
    assert len({ids for ids, _ in reference}) > 1
    for name, options in mode_options(path, dtype_bytes=2).items():
        gc.collect()
        peak = []
        assert outputs(path, max_tokens=12, device="cuda", peak=peak, **options) == reference, name
        if options.get("budget_bytes"):
            assert peak[0] <= options["budget_bytes"], (name, peak[0], options["budget_bytes"])
