"""The hybrid linear-attention models (qwen3_next, qwen3_5_moe): the Gated DeltaNet math against transformers'
torch fallback, long prompts that cross its chunks, the state cache under batching and preemption, and what the
planner counts. The shared runner (tests/model/test_models.py and the others) covers the rest."""

from __future__ import annotations

import pytest
import torch

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.model import gated_deltanet
from engine.model.config_file import read_args
from engine.model.sizes import model_sizes
from tests.model.test_models import alone_and_together
from tests.tiny_models import HYBRID_TYPES

LONG_PROMPT = "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n" * 6  # > 64 tokens: two chunks


def greedy(max_tokens=32) -> SamplingParams:
    return SamplingParams(max_tokens=max_tokens, ignore_eos=True)


def delta_inputs(T: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.randn(*shape, generator=generator)  # noqa: E731
    q, k, v = rand(T, 2, 16), rand(T, 2, 16), rand(T, 4, 8)
    g = -torch.nn.functional.softplus(rand(T, 4))
    beta, state = torch.sigmoid(rand(T, 4)), rand(4, 16, 8) * 0.1
    return q, k, v, g, beta, state


@pytest.mark.parametrize("T", [1, 5, 64, 150])
def test_chunked_form_equals_transformers(T):
    from transformers.models.qwen3_next.modeling_qwen3_next import torch_chunk_gated_delta_rule

    q, k, v, g, beta, state = delta_inputs(T)
    ours, our_state = gated_deltanet.chunked(q, k, v, g, beta, state)
    ref, ref_state = torch_chunk_gated_delta_rule(q[None], k[None], v[None], g[None], beta[None],
                                                  initial_state=state[None], output_final_state=True,
                                                  use_qk_l2norm_in_kernel=True)
    assert (ours - ref[0]).abs().max() < 1e-5 and (our_state - ref_state[0]).abs().max() < 1e-5


def test_recurrent_form_equals_transformers_and_the_chunked_form():
    from transformers.models.qwen3_next.modeling_qwen3_next import torch_recurrent_gated_delta_rule

    q, k, v, g, beta, state = delta_inputs(12, seed=1)
    ours, step_state = [], state[None]
    for t in range(12):
        out, step_state = gated_deltanet.recurrent_step(q[t : t + 1], k[t : t + 1], v[t : t + 1], g[t : t + 1],
                                                        beta[t : t + 1], step_state)
        ours.append(out)
    ref, ref_state = torch_recurrent_gated_delta_rule(q[None], k[None], v[None], g[None], beta[None],
                                                      initial_state=state[None], output_final_state=True,
                                                      use_qk_l2norm_in_kernel=True)
    assert torch.equal(torch.cat(ours), ref[0]) and torch.equal(step_state, ref_state)
    chunk_out, chunk_state = gated_deltanet.chunked(q, k, v, g, beta, state)
    assert (chunk_out - ref[0]).abs().max() < 1e-5 and (chunk_state - ref_state[0]).abs().max() < 1e-5


def test_conv_of_a_decode_step_equals_the_prefills():
    generator = torch.Generator().manual_seed(2)
    x, weight = torch.randn(9, 6, generator=generator), torch.randn(6, 4, generator=generator)
    whole, _ = gated_deltanet.causal_conv(x, torch.zeros(3, 6), weight)
    prefix, history = gated_deltanet.causal_conv(x[:8], torch.zeros(3, 6), weight)
    step, _ = gated_deltanet.causal_conv(x[8:], history, weight)
    assert torch.equal(whole[:8], prefix) and torch.equal(whole[8:], step)
    conv = torch.nn.functional.conv1d(x.T[None], weight[:, None], padding=3, groups=6)[0, :, :9].T
    ref = torch.nn.functional.silu(conv)
    assert (whole - ref).abs().max() < 1e-6


@pytest.mark.parametrize("model_type", HYBRID_TYPES)
def test_long_prompt_greedy_tokens_match_transformers(tiny_model_dir, model_type):
    from transformers import AutoModelForCausalLM

    folder = tiny_model_dir(model_type)
    with Engine(EngineOptions(model=str(folder), device="cpu")) as engine:
        ids = engine._core.tokenizer.encode(LONG_PROMPT)
        result = engine.generate(GenerateRequest(prompt=LONG_PROMPT, sampling=greedy()))
    assert len(ids) > 64
    reference = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.inference_mode():
        out = reference.generate(torch.tensor([ids]), max_new_tokens=32, min_new_tokens=32, do_sample=False,
                                 eos_token_id=None, pad_token_id=0)
    assert list(result.token_ids) == out[0, len(ids):].tolist()


@pytest.mark.parametrize("model_type", HYBRID_TYPES)
def test_eight_requests_of_different_lengths_each_get_their_solo_tokens(tiny_model_dir, model_type):
    prompts = [LONG_PROMPT[: 7 + 23 * i] for i in range(8)]
    alone, together = alone_and_together(tiny_model_dir(model_type), prompts, greedy(16))
    assert together == alone


@pytest.mark.parametrize("decode", ["dynamic", "static"])
def test_preempted_sequences_rebuild_their_state(tiny_model_dir, decode):
    """A KV pool too small for four sequences at once: some are preempted (state slot freed) and recomputed. The
    static decode step (what CUDA graphs hold) reads each state at its slot from the step's buffers."""
    folder = tiny_model_dir("qwen3_next")
    prompts = [LONG_PROMPT[: 40 + 10 * i] for i in range(4)]
    with Engine(EngineOptions(model=str(folder), device="cpu")) as engine:
        alone = [engine.generate(GenerateRequest(prompt=p, sampling=greedy(24))).token_ids for p in prompts]
    with Engine(EngineOptions(model=str(folder), device="cpu", kv_blocks=30, block_size=4, decode=decode)) as engine:
        handles = [engine.submit(GenerateRequest(prompt=p, sampling=greedy(24))) for p in prompts]
        results = [h.result() for h in handles]
    assert [r.token_ids for r in results] == alone
    assert sum(r.stats.num_preemptions for r in results) > 0


def test_a_vision_checkpoint_whose_image_token_is_outside_the_vocabulary_runs_its_language_model(tiny_model_dir):
    """The shared tiny qwen3_5_moe keeps the hub's image token id, past its 384-token vocabulary: its tower is not
    loaded (tests/vision has a checkpoint whose tokenizer has the vision tokens)."""
    from engine.cli import main

    folder = tiny_model_dir("qwen3_5_moe")
    with Engine(EngineOptions(model=str(folder), device="cpu")) as engine:
        assert not engine.sees_images
    assert main(["run", str(folder), "--prompt", "def fib(n):", "--max-tokens", "4", "--device", "cpu"]) == 0


@pytest.mark.parametrize("model_type", HYBRID_TYPES)
def test_kv_is_counted_for_full_attention_layers_only_plus_state_per_sequence(tiny_model_dir, model_type):
    args = read_args(tiny_model_dir(model_type))
    assert (args.num_kv_layers, args.num_linear_layers) == (1, 3)
    assert args.kv_bytes_per_token(4) == 2 * 1 * args.num_key_value_heads * args.head_dim * 4
    conv = 3 * (2 * 2 * 16 + 4 * 16) * 4
    recurrent = 4 * 16 * 16 * 4
    assert args.state_bytes_per_seq(4) == 3 * (conv + recurrent)
    assert model_sizes(args, 4).kv_bytes_per_token == args.kv_bytes_per_token(4)


@pytest.mark.parametrize("model_type", HYBRID_TYPES)
def test_the_plan_counts_the_dense_weights_and_the_state_the_engine_allocates(tiny_model_dir, model_type):
    from app.memory.memory_segments import memory_segments
    from engine.model.sizes import dense_params

    with Engine(EngineOptions(model=str(tiny_model_dir(model_type)), device="cpu", max_num_seqs=3)) as engine:
        model, cache, plan = engine._core.runner.model, engine._core.runner.cache, engine.plan
        assert sum(p.numel() for p in model.parameters()) == dense_params(model.args)
        assert plan.state_bytes == cache.state_bytes == 3 * model.args.state_bytes_per_seq(4)
        assert len(cache.k) == model.args.num_kv_layers
        assert plan.kv_block_bytes == plan.kv_bytes // plan.kv_blocks == 16 * model.args.kv_bytes_per_token(4)
    assert dict((s.key, s.num_bytes) for s in memory_segments(plan))["state"] == plan.state_bytes


@pytest.mark.parametrize("model_type", HYBRID_TYPES)
def test_the_plan_counts_the_scratch_states_of_static_verify_steps(tiny_model_dir, model_type):
    """An engine that drafts keeps a scratch state per draft of its largest static verify step (max_num_seqs 3,
    draft_tokens 4: 4), counted in the plan; one that does not draft keeps none."""
    for options, rows in ((dict(speculative="ngram", draft_tokens=4), 4), (dict(), 0)):
        with Engine(EngineOptions(model=str(tiny_model_dir(model_type)), device="cpu", max_num_seqs=3,
                                  **options)) as engine:
            cache, plan, args = engine._core.runner.cache, engine.plan, engine._core.runner.model.args
            assert cache.num_verify_rows == rows
            assert plan.state_bytes == cache.state_bytes == (3 + rows) * args.state_bytes_per_seq(4)


def test_a_budget_change_while_requests_run_loses_no_state(tiny_model_dir):
    """The re-split waits for the drained barrier; the sequences decoding before it keep their states."""
    from engine.alloc.memory_plan import GiB, MiB

    folder = str(tiny_model_dir("qwen3_5_moe"))
    prompts = [LONG_PROMPT[: 30 + 40 * i] for i in range(3)]
    with Engine(EngineOptions(model=folder, device="cpu")) as engine:
        alone = [engine.generate(GenerateRequest(prompt=p, sampling=greedy(24))).token_ids for p in prompts]
    with Engine(EngineOptions(model=folder, device="cpu", experts="paged", budget_bytes=GiB)) as engine:
        handles = [engine.submit(GenerateRequest(prompt=p, sampling=greedy(24))) for p in prompts]
        engine.set_budget(GiB - 256 * MiB)
        results = [h.result().token_ids for h in handles]
        after = [engine.generate(GenerateRequest(prompt=p, sampling=greedy(24))).token_ids for p in prompts]
        assert engine.plan.budget_bytes == GiB - 256 * MiB
    assert results == alone and after == alone


@pytest.mark.parametrize("model_type", HYBRID_TYPES)
def test_thinking_switch_and_tool_calls_as_for_qwen3(tmp_path, model_type):
    from engine.generation.prompt import prompt_token_ids
    from tests.generation.reasoning_fixtures import write_reasoning_model
    from tests.generation.tool_fixtures import WEATHER, write_tool_model

    ask = ({"role": "user", "content": "Weather in Paris?"},)
    think = write_reasoning_model(tmp_path / "think", "think", model_type)
    with Engine(EngineOptions(model=str(think), device="cpu")) as engine:
        assert engine.info.thinking_switch
        off = GenerateRequest(messages=ask, enable_thinking=False, sampling=greedy(4))
        ids = prompt_token_ids(off, engine._core.tokenizer, 4096)
        assert engine._core.tokenizer.decode(ids, skip_special_tokens=False).endswith("<think>\n\n</think>\n\n")
        assert engine.generate(off).error is None
    tools = write_tool_model(tmp_path / "tools", model_type)
    with Engine(EngineOptions(model=str(tools), device="cpu")) as engine:
        assert engine.info.tool_calls
        assert engine.generate(GenerateRequest(messages=ask, tools=(WEATHER,), sampling=greedy(4))).error is None


def test_the_host_tier_reads_a_vision_checkpoints_expert_rows_through_the_page_cache(tiny_model_dir):
    """qwen3_5_moe's experts live under model.language_model.*: rows left in the file are read by those names."""
    from engine.alloc.host_tier import STAGING_ROWS
    from tests.experts.test_host_tier import generate, row_bytes

    folder = tiny_model_dir("qwen3_5_moe")
    reference, _ = generate(folder, expert_slots=2)
    capped, stats = generate(folder, expert_slots=2, host_budget_bytes=(STAGING_ROWS + 3) * row_bytes(folder))
    assert capped == reference and stats.page_cache_reads > 0


def test_the_warm_up_before_a_graph_capture_leaves_the_states_as_the_step_left_them(tiny_model_dir):
    """Before capturing its per-layer graphs (static experts, the host pager), a decode step runs the layers' dense
    parts once more. A linear-attention layer's dense part advances the recurrent and conv states, so it must be left
    out, or the captured step would start from a state updated twice (on the H200 static experts' bits then
    differed from resident's). The control shows the test can fail: every layer's dense part does change them."""
    folder = tiny_model_dir("qwen3_next")
    with Engine(EngineOptions(model=str(folder), device="cpu", decode="static")) as engine:
        engine.generate(GenerateRequest(prompt=LONG_PROMPT[:40], sampling=greedy(4)))
        runner = engine._core.runner
        padded = runner.padded_decode.by_batch[1]
        states = lambda: [t.clone() for t in runner.cache.state_tensors]  # noqa: E731
        before = states()
        with torch.inference_mode():
            padded.warm_up()
            assert all(torch.equal(a, b) for a, b in zip(before, states()))
            for index in range(len(padded.model.layers)):
                padded.dense_part(index)
        assert not all(torch.equal(a, b) for a, b in zip(before, states()))


@pytest.mark.parametrize("model_type", ["lfm2_moe", "nemotron_h"])
def test_static_decode_gives_the_dynamic_decodes_tokens_batched(tiny_model_dir, model_type):
    """The padded decode step of the short-conv and Mamba-2 stacks (forward_padded at each sequence's state slot:
    what CUDA graphs capture) against the per-sequence path, three prompts of different lengths batched."""
    folder = tiny_model_dir(model_type)
    prompts = ["def fib(n):", "The quick brown fox jumps over the lazy dog", "class Stack:\n    def push(self):"]

    def batch(decode: str):
        with Engine(EngineOptions(model=str(folder), device="cpu", decode=decode)) as engine:
            handles = engine.submit_batch([GenerateRequest(prompt=p, sampling=SamplingParams(max_tokens=12,
                                                                                            ignore_eos=True))
                                           for p in prompts])
            return [list(h.result().token_ids) for h in handles]

    assert batch("static") == batch("dynamic")
