"""Drafting from the checkpoint's own draft layer is lossless: greedy token ids identical to --speculative off,
logprobs within 1e-4, alone and batched, in every family with a draft layer and every expert mode. A draft layer
built to predict the model's own next token is accepted; a random one is not, and changes nothing."""

from __future__ import annotations

import pytest

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.model.loader import read_args
from tests.experts.test_expert_modes import mode_options
from tests.mtp_checkpoints import MTP_TYPES, mtp_model_dir  # noqa: F401 - the fixture

PROMPTS = ["def add(a, b):\n    return a + b\n", "one two three one two", "héllo wörld"]
GREEDY = SamplingParams(max_tokens=16, ignore_eos=True)


def run(folder, prompts=PROMPTS, **options):
    """The first prompt alone, then all batched -> (token ids and logprobs of each result, proposed, accepted)."""
    with Engine(EngineOptions(model=str(folder), device="cpu", **options)) as engine:
        results = [engine.generate(GenerateRequest(prompt=prompts[0], sampling=GREEDY))]
        results += [h.result() for h in engine.submit_batch([GenerateRequest(prompt=p, sampling=GREEDY)
                                                             for p in prompts])]
    assert all(r.error is None for r in results), [r.error for r in results]
    outputs = [(list(r.token_ids), list(r.logprobs)) for r in results]
    return outputs, sum(r.stats.spec_proposed for r in results), sum(r.stats.spec_accepted for r in results)


def assert_same(drafted, plain):
    for (ids, logprobs), (plain_ids, plain_logprobs) in zip(drafted, plain, strict=True):
        assert ids == plain_ids
        assert logprobs == pytest.approx(plain_logprobs, abs=1e-4)


@pytest.mark.parametrize("model_type", MTP_TYPES)
def test_a_random_draft_layer_changes_nothing(mtp_model_dir, model_type):  # noqa: F811
    folder = mtp_model_dir(model_type)
    plain, proposed, _ = run(folder)
    assert proposed == 0
    drafted, proposed, accepted = run(folder, speculative="mtp")
    assert_same(drafted, plain)
    assert proposed > 0 and accepted <= proposed // 4


@pytest.mark.parametrize("model_type", MTP_TYPES)
def test_a_draft_layer_that_predicts_the_model_is_accepted(mtp_model_dir, model_type):  # noqa: F811
    folder = mtp_model_dir(model_type, copying=True)
    plain, _, _ = run(folder)
    drafted, proposed, accepted = run(folder, speculative="auto")
    assert_same(drafted, plain)
    assert proposed > 0 and accepted >= 0.8 * proposed


@pytest.mark.parametrize("model_type", ["qwen3_5_moe", "deepseek_v3"])
def test_lossless_in_every_expert_mode(mtp_model_dir, model_type):  # noqa: F811
    folder = mtp_model_dir(model_type)
    args = read_args(folder)
    plain, _, _ = run(folder, PROMPTS[:2])
    for name, options in mode_options(args.num_experts_per_tok, args.num_experts).items():
        drafted, proposed, _ = run(folder, PROMPTS[:2], speculative="mtp", **options)
        assert_same(drafted, plain)
        assert proposed > 0, name


def test_the_engine_says_whether_the_model_has_draft_layers(mtp_model_dir, tiny_model_dir):  # noqa: F811
    with Engine(EngineOptions(model=str(mtp_model_dir("glm4_moe")), device="cpu")) as engine:
        assert engine.has_draft_layers and engine.info.has_draft_layers
        assert engine._core.speculation is None  # off: the draft layer is not loaded
    # its config declares a draft layer, but transformers saved none of its tensors: auto drafts by prompt lookup
    with Engine(EngineOptions(model=str(tiny_model_dir("glm4_moe")), device="cpu", speculative="auto")) as engine:
        assert not engine.has_draft_layers
        assert engine._core.speculation.drafter is None


def test_the_plan_counts_the_draft_layer(mtp_model_dir):  # noqa: F811
    folder = mtp_model_dir("qwen3_next")
    plans = {}
    for mode in ("off", "mtp"):
        with Engine(EngineOptions(model=str(folder), device="cpu", speculative=mode)) as engine:
            plans[mode] = engine.info.plan
            speculation = engine._core.speculation
            if mode == "mtp":
                draft = speculation.drafter.draft
                loaded = sum(p.numel() * p.element_size() for p in draft.layer.parameters())
                loaded += draft.experts.blocks.numel() * draft.experts.blocks.element_size()
                pools = [t for pool in engine._core.runner.cache.pools() for t in pool]
                assert sum(t.numel() * t.element_size() for t in pools) == plans[mode].kv_bytes
    assert plans["mtp"].dense_bytes - plans["off"].dense_bytes == loaded
    kv_layers = read_args(folder).num_kv_layers
    assert plans["mtp"].kv_block_bytes * kv_layers == plans["off"].kv_block_bytes * (kv_layers + 1)


@pytest.mark.parametrize("model_type", ["qwen3_5_moe", "glm4_moe"])
def test_static_shape_decode_steps_feed_the_draft_layer(mtp_model_dir, model_type):  # noqa: F811
    """The CUDA-graph path's shapes on the CPU: decode steps without drafts hand over copies of their rows."""
    folder = mtp_model_dir(model_type, copying=True)
    plain, _, _ = run(folder, PROMPTS[:2], decode="static")
    drafted, proposed, accepted = run(folder, PROMPTS[:2], decode="static", speculative="mtp")
    assert_same(drafted, plain)
    assert proposed > 0 and accepted >= 0.8 * proposed


@pytest.mark.parametrize("decode", ["dynamic", "static"])
@pytest.mark.parametrize("model_type", ["qwen3_next", "deepseek_v3"])
def test_the_draft_layers_kv_follows_the_sequence(mtp_model_dir, model_type, decode):  # noqa: F811
    """The drafter's incremental bookkeeping (hidden states waiting from prefills, plain decode steps and verify
    steps with rejections; the draft layer's KV written a stretch at a time) gives the first draft of every verify
    step the input a recomputation over the whole sequence gives it."""
    import itertools

    import torch

    from engine.model.attention import AttentionMetadata, SeqSpan
    from tests.runtime.test_mtp_layer import hf_parts

    folder = mtp_model_dir(model_type)
    with Engine(EngineOptions(model=str(folder), device="cpu", speculative="mtp", decode=decode)) as engine:
        speculation = engine._core.speculation
        lengths = itertools.cycle([3, 0, 0, 2, 0, 1, 0, 0, 0, 4])
        speculation.draft_length.choose = lambda: next(lengths)  # plain decode steps between verify steps
        drafter, caught_up = speculation.drafter, []
        propose, run_layer = drafter.propose, drafter.run

        def recording_propose(request_id, token_ids, num_drafts):
            caught_up.append([list(token_ids), None])
            return propose(request_id, token_ids, num_drafts)

        def recording_run(seq, next_tokens, hidden, start):
            outputs = run_layer(seq, next_tokens, hidden, start)
            if caught_up[-1][1] is None:
                caught_up[-1][1] = outputs[1][-1].clone()  # the catch-up's last row: the first draft's input
            return outputs

        drafter.propose, drafter.run = recording_propose, recording_run
        result = engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=SamplingParams(max_tokens=24,
                                                                                            ignore_eos=True)))
        checked = [(tokens, row) for tokens, row in caught_up if row is not None]
        assert result.error is None and len(checked) >= 4
        draft = drafter.draft
        tokens, row = checked[-1]
        *_, hidden = hf_parts(folder, engine.info.model_type, tokens[:-1])
        count = len(tokens) - 1
        slots = torch.arange(count)
        with torch.inference_mode():
            _, head_input = draft.forward(torch.tensor(tokens[1:]), hidden, torch.arange(count),
                                          AttentionMetadata(slot_mapping=slots, spans=[SeqSpan(0, count, slots)]))
    torch.testing.assert_close(row, head_input[-1], atol=1e-4, rtol=1e-4)


def test_sampled_requests_take_drafts_by_rejection_sampling(mtp_model_dir):  # noqa: F811
    """With sampling, a draft is kept with the model's probability of it (verify.sampled_tokens): a draft layer that
    predicts the model's argmax is mostly kept at a low temperature. (A seed does not repeat its tokens from run to
    run here: the draft lengths follow measured step times, and so does the number of random draws.)"""
    folder = mtp_model_dir("qwen3_next", copying=True)
    sampled = SamplingParams(max_tokens=24, temperature=0.05, seed=3, ignore_eos=True)
    with Engine(EngineOptions(model=str(folder), device="cpu", speculative="mtp")) as engine:
        result = engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=sampled))
    assert result.error is None and len(result.token_ids) == 24
    assert result.stats.spec_accepted >= 0.5 * result.stats.spec_proposed > 0, result.stats
