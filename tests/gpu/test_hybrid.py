"""The hybrid linear-attention models (qwen3_next, qwen3_5_moe) on CUDA: `pytest -m gpu tests/gpu/test_hybrid.py`.
They fail (not skip) without a GPU. tests/gpu/test_cuda.py's shared runner covers them too (bf16 against
transformers, every expert mode bitwise); these add what is theirs: fp32 token-exact against transformers across
the chunked form's 64-token chunks, batching and preemption with the state cache, repeatability, and the budget
with the state planned beside KV."""

from __future__ import annotations

import gc

import pytest
import torch

from engine.alloc.memory_plan import GiB
from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.model.loader import read_args
from tests.experts.test_expert_modes import mode_options
from tests.model.test_hybrid import LONG_PROMPT
from tests.tiny_models import HYBRID_TYPES, write_tiny_model

pytestmark = pytest.mark.gpu
PROMPTS = [LONG_PROMPT[: 7 + 23 * i] for i in range(8)]  # 8 lengths, the longest past one 64-token chunk


def greedy(max_tokens: int = 32) -> SamplingParams:
    return SamplingParams(max_tokens=max_tokens, ignore_eos=True)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    cache = {}

    def get(model_type: str, dtype: torch.dtype):
        if (model_type, dtype) not in cache:
            folder = tmp_path_factory.mktemp(f"{model_type}-{str(dtype)[6:]}")
            cache[model_type, dtype] = write_tiny_model(folder, model_type, dtype=dtype)
        return cache[model_type, dtype]

    return get


@pytest.mark.parametrize("model_type", HYBRID_TYPES)
@pytest.mark.parametrize("prompt", [PROMPTS[0], LONG_PROMPT], ids=["short", "two-chunks"])
def test_fp32_greedy_tokens_match_transformers_on_cuda(model_dir, model_type, prompt):
    from transformers import AutoModelForCausalLM

    folder = model_dir(model_type, torch.float32)
    with Engine(EngineOptions(model=str(folder), device="cuda", dtype="float32")) as engine:
        ids = engine._core.tokenizer.encode(prompt)
        ours = engine.generate(GenerateRequest(prompt=prompt, sampling=greedy())).token_ids
    reference = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).cuda().eval()
    with torch.inference_mode():
        out = reference.generate(torch.tensor([ids], device="cuda"), max_new_tokens=32, min_new_tokens=32,
                                 do_sample=False, eos_token_id=None, pad_token_id=0)
    assert list(ours) == out[0, len(ids):].tolist()


def outputs(folder, **options) -> list[tuple]:
    """Greedy alone, then the eight prompts batched: token ids and logprobs."""
    with Engine(EngineOptions(model=str(folder), device="cuda", **options)) as engine:
        results = [engine.generate(GenerateRequest(prompt=PROMPTS[3], sampling=greedy(16)))]
        results += [h.result() for h in engine.submit_batch([GenerateRequest(prompt=p, sampling=greedy(16))
                                                              for p in PROMPTS])]
    assert all(r.error is None for r in results), [r.error for r in results]
    return [(r.token_ids, r.logprobs) for r in results]


@pytest.mark.parametrize("model_type", HYBRID_TYPES)
def test_bf16_every_expert_mode_is_bitwise_resident_and_repeatable(model_dir, model_type):
    folder = model_dir(model_type, torch.bfloat16)
    args = read_args(folder)
    reference = outputs(folder, experts="resident")
    assert outputs(folder, experts="resident") == reference, "not repeatable"
    for name, options in mode_options(args.num_experts_per_tok, args.num_experts).items():
        assert outputs(folder, **options) == reference, name


@pytest.mark.parametrize("model_type", HYBRID_TYPES)
def test_eight_requests_of_different_lengths_each_get_their_solo_tokens(model_dir, model_type):
    folder = model_dir(model_type, torch.float32)
    with Engine(EngineOptions(model=str(folder), device="cuda", dtype="float32")) as engine:
        alone = [engine.generate(GenerateRequest(prompt=p, sampling=greedy(16))).token_ids for p in PROMPTS]
        together = [h.result().token_ids
                    for h in engine.submit_batch([GenerateRequest(prompt=p, sampling=greedy(16)) for p in PROMPTS])]
    assert together == alone


def test_preempted_sequences_rebuild_their_state_on_cuda(model_dir):
    folder = model_dir("qwen3_5_moe", torch.float32)
    prompts = PROMPTS[1:5]
    with Engine(EngineOptions(model=str(folder), device="cuda", dtype="float32")) as engine:
        alone = [engine.generate(GenerateRequest(prompt=p, sampling=greedy(24))).token_ids for p in prompts]
    with Engine(EngineOptions(model=str(folder), device="cuda", dtype="float32", kv_blocks=40, block_size=4)) as tight:
        results = [h.result() for h in tight.submit_batch([GenerateRequest(prompt=p, sampling=greedy(24))
                                                           for p in prompts])]
    assert [r.token_ids for r in results] == alone
    assert sum(r.stats.num_preemptions for r in results) > 0


@pytest.mark.parametrize("name", ["qwen3-next-80b-a3b", "qwen3.5-35b-a3b"])
def test_paged_hybrid_shape_stays_within_budget(name):
    """Four layers of the published shape (three linear, one full attention), paged at 5 GiB (their minimum budgets are
    3.1 and 3.8 GiB): dense weights, slots, KV, workspace and the state of every sequence stay under the budget
    through prefill and decode."""
    from engine.bench.suite import decode_once, plan_for
    from engine.bench.synthetic import IdOnlyTokenizer, synthetic_weights
    from engine.model.shapes import shape
    from engine.runtime.builder import assemble_engine

    device = torch.device("cuda")
    weights = synthetic_weights(shape(name, num_layers=4), device, experts_on_host=True)
    budget = 5 * GiB
    gc.collect()
    torch.cuda.empty_cache()
    dense = sum(t.numel() * t.element_size() for t in weights.model.state_dict().values() if t.is_cuda)
    others = torch.cuda.memory_allocated(device) - dense
    torch.cuda.reset_peak_memory_stats(device)
    plan = plan_for(weights, "paged", budget, None, batch=2, max_len=4096)
    engine = assemble_engine(weights, IdOnlyTokenizer(), EngineOptions(device="cuda", experts="paged", max_num_seqs=2),
                             plan, device, 4096)
    assert plan.state_bytes == engine.runner.cache.state_bytes > 0
    decode_once(engine, prompt=1024, tokens=16, batch=2, seed=0)
    peak = torch.cuda.max_memory_allocated(device) - others
    print(f"{name}: budget {budget / 1e6:.0f} MB, plan {plan.total_bytes / 1e6:.0f} MB (state "
          f"{plan.state_bytes / 1e6:.0f}, kv {plan.kv_bytes / 1e6:.0f}, {plan.min_layer_slots} slots); peak "
          f"{peak / 1e6:.0f} MB")
    assert peak <= budget


@pytest.mark.parametrize("model_type", HYBRID_TYPES)
def test_graph_decode_gives_the_dynamic_paths_tokens_and_the_same_bits_in_every_expert_mode(model_dir, model_type):
    """The whole-step CUDA graph path gives the dynamic path's tokens in fp32 (their logprobs within rounding: the
    padded batch computes the linear layers' state updates as one batch, the dynamic path per sequence), and in bf16
    its bits are the same in every expert mode. bf16 tokens are not compared across the two paths: the tiny models'
    top logprobs sit near -3.5, so a bf16 rounding apart can pick another token (seen on the CPU)."""
    exact = model_dir(model_type, torch.float32)
    dynamic = outputs(exact, experts="resident", decode="dynamic", dtype="float32")
    graphed = outputs(exact, experts="resident", decode="graphs", dtype="float32")
    assert [ids for ids, _ in graphed] == [ids for ids, _ in dynamic]
    for (_, a), (_, b) in zip(graphed, dynamic):
        assert max(abs(x - y) for x, y in zip(a, b)) < 1e-3
    folder = model_dir(model_type, torch.bfloat16)
    args = read_args(folder)
    reference = outputs(folder, experts="resident", decode="graphs")
    for name, options in mode_options(args.num_experts_per_tok, args.num_experts).items():
        assert outputs(folder, decode="graphs", **options) == reference, name
