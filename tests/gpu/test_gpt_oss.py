"""gpt_oss on CUDA, run on the H200: `pytest -m gpu tests/gpu/test_gpt_oss.py`. The Triton decode kernel with
sinks and a sliding window (its first chunks skipped once a context passes 256 + window positions), CUDA graphs,
and the expert biases beside paged slots. They fail (not skip) without a GPU."""

from __future__ import annotations

import pytest
import torch

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from tests.experts.test_expert_modes import PROMPTS, SEEDED
from tests.tiny_models import write_tiny_model

pytestmark = pytest.mark.gpu

LONG_PROMPT = "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n" * 16  # > 256 + the window
GREEDY = SamplingParams(max_tokens=32, ignore_eos=True)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    cache = {}

    def get(dtype):
        if dtype not in cache:
            cache[dtype] = write_tiny_model(tmp_path_factory.mktemp(str(dtype)[6:]), "gpt_oss", dtype=dtype)
        return cache[dtype]

    return get


def outputs(folder, **options) -> list[tuple]:
    prompts = [LONG_PROMPT, *PROMPTS]
    with Engine(EngineOptions(model=str(folder), device="cuda", **options)) as engine:
        results = [engine.generate(GenerateRequest(prompt=LONG_PROMPT, sampling=s)) for s in (GREEDY, SEEDED)]
        results += [h.result() for h in engine.submit_batch(
            [GenerateRequest(prompt=p, sampling=(GREEDY, SEEDED)[i % 2]) for i, p in enumerate(prompts)])]
    assert all(r.reason == "length" for r in results), [r.error for r in results]
    return [(r.token_ids, r.logprobs) for r in results]


def transformers_model(folder, dtype):
    from transformers import AutoModelForCausalLM

    # transformers' op-for-op paths: no hub attention kernels, no grouped_mm (its CUDA kernels are bf16-first)
    return AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation="eager",
                                                experts_implementation="eager").cuda().eval()


def transformers_greedy(model, ids: list[int]) -> list[int]:
    with torch.inference_mode():
        out = model.generate(torch.tensor([ids], device="cuda"), max_new_tokens=32, min_new_tokens=32,
                             do_sample=False, eos_token_id=None, pad_token_id=0)
    return out[0, len(ids):].tolist()


def margin_at(model, ids: list[int], ours: tuple[int, ...], reference: list[int], at: int) -> float:
    """How many nats the model rates its own choice at position `at` above ours."""
    with torch.inference_mode():
        logprobs = model(torch.tensor([ids + list(ours[:at])], device="cuda")).logits[0, -1].float().log_softmax(-1)
    return (logprobs[reference[at]] - logprobs[ours[at]]).item()


def first_difference(ours, reference) -> int:
    return next((i for i, (a, b) in enumerate(zip(ours, reference)) if a != b), 32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_greedy_matches_transformers_on_cuda(model_dir, dtype):
    """fp32: every greedy token equals transformers' fp32 run. bf16: a tiny random model's logits are nearly flat,
    so rounding may flip a near-tie early in either program: Wisp follows transformers bf16 or fp32 for 16
    tokens, or parts from fp32 only where fp32 rates the two choices within a bf16 rounding step (0.05 nats)."""
    folder = model_dir(dtype)
    with Engine(EngineOptions(model=str(folder), device="cuda", dtype=str(dtype)[6:])) as engine:
        ids = engine._core.tokenizer.encode(LONG_PROMPT)
        ours = engine.generate(GenerateRequest(prompt=LONG_PROMPT, sampling=GREEDY)).token_ids
    assert len(ids) > 256 + 8
    matching = first_difference(ours, transformers_greedy(transformers_model(folder, dtype), ids))
    print(f"gpt_oss {dtype}: {matching}/32 greedy tokens equal to transformers (CUDA)")
    if dtype == torch.float32:
        assert matching == 32
        return
    exact = transformers_model(folder, torch.float32)
    reference = transformers_greedy(exact, ids)
    matching_fp32 = first_difference(ours, reference)
    print(f"gpt_oss bf16: {matching_fp32}/32 greedy tokens equal to transformers fp32 (CUDA)")
    if max(matching, matching_fp32) < 16:
        margin = margin_at(exact, ids, ours, reference, matching_fp32)
        assert margin < 0.05, f"token {matching_fp32}: fp32 rates Wisp's choice {margin:.3f} nats below its own"


def test_expert_modes_bitwise_with_graphs_on_cuda(model_dir):
    folder = model_dir(torch.bfloat16)
    reference = outputs(folder, experts="resident")
    for options in (dict(experts="static"), dict(experts="paged", expert_slots=2),
                    dict(experts="paged", expert_slots=3)):
        assert outputs(folder, **options) == reference, options


def test_graph_replays_equal_the_eager_paths(model_dir):
    folder = model_dir(torch.bfloat16)
    graphs = outputs(folder, decode="graphs")
    assert outputs(folder, decode="static") == graphs
    assert outputs(folder, decode="dynamic") == graphs  # the same Triton kernel outside the graphs


def test_the_kernel_and_the_eager_sink_attention_give_the_same_tokens(model_dir):
    folder = model_dir(torch.float32)
    kernel = [tokens for tokens, _ in outputs(folder, dtype="float32")]
    assert [tokens for tokens, _ in outputs(folder, dtype="float32", attention="sdpa")] == kernel
