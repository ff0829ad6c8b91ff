"""Verify steps with static shapes (the path CUDA graphs capture, run eagerly on the CPU): a sequence's last token and
its drafts are rows of the padded decode step, so with static decode on, drafting gives the token ids of
decoding without drafts and their log-probabilities within 1e-4, alone and batched with different draft counts, in
every expert mode; and such steps do not fall back to the dynamic path where the static one takes them. Hybrids
whose state layers are Gated DeltaNet (qwen3_5_moe, qwen3_next) verify there too, a sequence's rows stepping its
states in order; other state layers verify on the dynamic path. (On the CPU in fp32 with SDPA attention a row's last
bits depend on the batch's size, in plain static decode too; with the Triton decode kernels, in bf16, they do not:
the last test.)"""

from __future__ import annotations

import dataclasses
import itertools

import pytest

from engine.api import Engine, EngineOptions, GenerateRequest
from engine.generation.speculative.replay import AcceptanceReplay
from engine.model.loader import read_args
from engine.model.state_cache import HybridCache
from engine.runtime.model_runner import ModelRunner
from tests.experts.test_expert_modes import mode_options
from tests.mtp_checkpoints import mtp_model_dir  # noqa: F401 - the fixture
from tests.runtime.test_speculative_engine import GREEDY, PROMPTS, OracleDrafts, requests

ATTENTION_ONLY = ["qwen3_moe", "deepseek_v3", "gpt_oss"]  # GQA, MLA, sinks and a sliding window
HYBRIDS = ["qwen3_5_moe", "qwen3_next"]  # Gated DeltaNet and gated attention layers


class StepPaths:
    """Counts the runner's decode steps with drafts by the path they took."""

    def __init__(self, monkeypatch):
        self.padded, self.dynamic = 0, 0
        decode_padded, prepare = ModelRunner.decode_padded, ModelRunner.prepare

        def counted_padded(runner, seqs, *args, **kwargs):
            self.padded += any(seq.draft_ids for seq in seqs)
            return decode_padded(runner, seqs, *args, **kwargs)

        def counted_prepare(runner, seqs, is_prefill):
            self.dynamic += not is_prefill and any(seq.draft_ids for seq in seqs)
            return prepare(runner, seqs, is_prefill)

        monkeypatch.setattr(ModelRunner, "decode_padded", counted_padded)
        monkeypatch.setattr(ModelRunner, "prepare", counted_prepare)


class OneDraft:
    """OracleDrafts, one draft a step."""

    def __init__(self, reference: dict[str, list[int]]):
        self.reference = reference

    def oracle(self, engine: Engine):
        drafts = OracleDrafts(engine, self.reference)
        return lambda request_id, token_ids, room: drafts(request_id, token_ids, min(room, 1))


def run(folder, reference=None, **options):
    """The first prompt alone, then all three batched -> ([(token ids, logprobs)] in order, drafts accepted)."""
    options = {"max_num_seqs": 16, "draft_tokens": 4, **options}  # up to 15 rows a step: the static sizes
    with Engine(EngineOptions(model=str(folder), device="cpu", decode="static", **options)) as engine:
        if isinstance(reference, (OneDraft, MixedDrafts)):
            engine._core.speculation.propose = reference.oracle(engine)
        elif reference is not None:
            engine._core.speculation.propose = OracleDrafts(engine, reference)
        results = [engine.generate(r) for r in requests(PROMPTS[:1], GREEDY)]
        results += [h.result() for h in engine.submit_batch(requests(PROMPTS, GREEDY))]
    assert all(r.error is None for r in results), [r.error for r in results]
    return [(list(r.token_ids), list(r.logprobs)) for r in results], sum(r.stats.spec_accepted for r in results)


def assert_same(drafted, plain):
    for (ids, logprobs), (plain_ids, plain_logprobs) in zip(drafted, plain, strict=True):
        assert ids == plain_ids
        assert logprobs == pytest.approx(plain_logprobs, abs=1e-4)


def reference_of(plain) -> dict[str, list[int]]:
    """The batched pass's ids by request id (the oracle drafts them; the alone pass's r0 is the same request)."""
    return {f"r{i}": ids for i, (ids, _) in enumerate(plain[1:])}


@pytest.mark.parametrize("model_type", ATTENTION_ONLY)
def test_static_verify_steps_equal_decoding_without_drafts(tiny_model_dir, model_type, monkeypatch):
    folder = tiny_model_dir(model_type)
    plain, _ = run(folder)
    paths = StepPaths(monkeypatch)
    drafted, accepted = run(folder, reference_of(plain), speculative="ngram")
    assert_same(drafted, plain)
    assert accepted > 0
    assert paths.padded > 0 and paths.dynamic == 0


def test_static_verify_steps_are_lossless_in_every_expert_mode(tiny_model_dir, monkeypatch):
    folder = tiny_model_dir("qwen3_moe")
    args = read_args(folder)
    plain, _ = run(folder)
    paths = StepPaths(monkeypatch)
    for name, options in mode_options(args.num_experts_per_tok, args.num_experts).items():
        drafted, accepted = run(folder, reference_of(plain), speculative="ngram", **options)
        assert_same(drafted, plain)
        assert accepted > 0, name
    assert paths.padded > 0 and paths.dynamic == 0


def replayed(folder, decode: str):
    """The bench's AcceptanceReplay (random drafts accepted at a stated rate, then the model's argmax), 4 drafts a
    step -> (token ids, logprobs) of each request, alone then batched."""
    with Engine(EngineOptions(model=str(folder), device="cpu", decode=decode, speculative="ngram",
                              max_num_seqs=16)) as engine:
        replay, vocab = AcceptanceReplay(0.6), engine._core.runner.model.args.vocab_size
        engine._core.speculation.replay = replay
        engine._core.speculation.propose = lambda request_id, token_ids, room: replay.drafts(vocab, min(room, 4))
        results = [engine.generate(r) for r in requests(PROMPTS[:1], GREEDY)]
        results += [h.result() for h in engine.submit_batch(requests(PROMPTS, GREEDY))]
    assert all(r.error is None and r.stats.spec_accepted > 0 for r in results)
    return [(list(r.token_ids), list(r.logprobs)) for r in results]


def test_replayed_acceptance_takes_the_static_path(tiny_model_dir, monkeypatch):
    folder = tiny_model_dir("qwen3_moe")
    dynamic = replayed(folder, "dynamic")
    paths = StepPaths(monkeypatch)
    static = replayed(folder, "static")
    assert_same(static, dynamic)
    assert paths.padded > 0 and paths.dynamic == 0


def test_steps_with_more_rows_than_the_static_sizes_run_dynamic(tiny_model_dir, monkeypatch):
    """max_num_seqs 3, draft_tokens 1: at most 3 rows a static step; one sequence with its draft is 2 rows, three
    are 6."""
    folder = tiny_model_dir("qwen3_moe")
    plain, _ = run(folder, max_num_seqs=3)
    paths = StepPaths(monkeypatch)
    drafted, accepted = run(folder, OneDraft(reference_of(plain)), speculative="ngram", max_num_seqs=3,
                            draft_tokens=1)
    assert_same(drafted, plain)
    assert accepted > 0 and paths.padded > 0 and paths.dynamic > 0


@pytest.mark.parametrize("model_type", ["glm4_moe", "deepseek_v3", *HYBRIDS])
def test_mtp_drafts_verify_on_the_static_path(mtp_model_dir, model_type, monkeypatch):  # noqa: F811
    """The draft layer reads the verify rows' hidden states, which the static path hands over too (the hybrids'
    rows chained through their scratch states)."""
    folder = mtp_model_dir(model_type, copying=True)
    plain, _ = run(folder)
    paths = StepPaths(monkeypatch)
    drafted, accepted = run(folder, speculative="mtp")
    assert_same(drafted, plain)
    assert accepted > 0 and paths.padded > 0 and paths.dynamic == 0


class StaticRollBacks:
    """Counts roll-backs to the state rows a static verify step kept (HybridCache.verified_rows)."""

    def __init__(self, monkeypatch):
        self.count = 0
        roll_back = HybridCache.roll_back

        def counted(cache, slot, position):
            self.count += slot in cache.verified_rows
            return roll_back(cache, slot, position)

        monkeypatch.setattr(HybridCache, "roll_back", counted)


class MixedDrafts:
    """OracleDrafts (a rejection every third call), up to 4 drafts a step for r0, 2 for r1 and none for r2: a
    batched step's sequences have different draft counts, one none."""

    LIMITS = {"r0": 4, "r1": 2, "r2": 0}

    def __init__(self, reference: dict[str, list[int]]):
        self.reference = reference

    def oracle(self, engine: Engine):
        drafts = OracleDrafts(engine, self.reference)
        return lambda request_id, token_ids, room: drafts(request_id, token_ids, min(room, self.LIMITS[request_id]))


# qwen3_5_moe in the slow step: its Gated DeltaNet layers are qwen3_next's (engine.model.hybrid), projections apart
@pytest.mark.parametrize("model_type", [pytest.param(m, marks=pytest.mark.slow) if m == "qwen3_5_moe" else m
                                        for m in HYBRIDS])
def test_hybrid_verify_steps_chain_their_states_on_the_static_path(tiny_model_dir, model_type, monkeypatch):
    """Gated DeltaNet layers step a sequence's verify rows one after another inside the static step, keep the
    states after each row in scratch rows and roll back to the last accepted one: in every expert mode, alone and
    batched with different draft counts (one sequence with none), the ids of decoding without drafts."""
    folder = tiny_model_dir(model_type)
    args = read_args(folder)
    plain, _ = run(folder)
    paths, roll_backs = StepPaths(monkeypatch), StaticRollBacks(monkeypatch)
    modes = {"resident": {}, **mode_options(args.num_experts_per_tok, args.num_experts)}
    for name, options in modes.items():
        for reference in (reference_of(plain), MixedDrafts(reference_of(plain))):
            drafted, accepted = run(folder, reference, speculative="ngram", **options)
            assert_same(drafted, plain)
            assert accepted > 0, name
    assert paths.padded > 0 and paths.dynamic == 0
    assert roll_backs.count > 0


def test_hybrid_requests_that_draft_on_an_engine_started_without_drafts_verify_dynamic(tiny_model_dir,
                                                                                         monkeypatch):
    """An engine started with --speculative off keeps no scratch state rows; a request that asks for drafts there
    verifies on the dynamic path (and rolls back the states it kept there), with the same ids."""
    from engine.runtime.speculation import Speculation

    folder = tiny_model_dir("qwen3_5_moe")
    plain, _ = run(folder)
    paths = StepPaths(monkeypatch)
    with Engine(EngineOptions(model=str(folder), device="cpu", decode="static", max_num_seqs=16)) as engine:
        assert engine._core.runner.cache.num_verify_rows == 0
        engine._core.speculation = Speculation(4)
        engine._core.speculation.propose = OracleDrafts(engine, reference_of(plain))
        drafting = [dataclasses.replace(r, speculative="ngram") for r in requests(PROMPTS, GREEDY)]
        results = [h.result() for h in engine.submit_batch(drafting)]
    assert_same([(list(r.token_ids), list(r.logprobs)) for r in results], plain[1:])
    assert sum(r.stats.spec_accepted for r in results) > 0 and paths.padded == 0 and paths.dynamic > 0


def test_hybrids_with_other_state_layers_verify_on_the_dynamic_path(tiny_model_dir, monkeypatch):
    """lfm2_moe's short conv keeps no chains: its verify steps run dynamic."""
    folder = tiny_model_dir("lfm2_moe")
    plain, _ = run(folder)
    paths = StepPaths(monkeypatch)
    drafted, accepted = run(folder, reference_of(plain), speculative="ngram")
    assert_same(drafted, plain)
    assert accepted > 0 and paths.padded == 0 and paths.dynamic > 0


def test_a_verify_step_that_captures_graphs_is_not_timed(tiny_model_dir, monkeypatch):
    """A row count's first graphed step also captures its graphs; the draft length rule times only later ones. Here
    every step reports a capture, so the rule's step times stay empty; with none, every verify step is timed."""
    from engine.runtime.decode_graphs import DecodeGraphs

    folder = tiny_model_dir("qwen3_moe")

    def fitted_weight(captures) -> float:
        monkeypatch.setattr(DecodeGraphs, "capture_totals", lambda graphs: (next(captures), 0.0))
        with Engine(EngineOptions(model=str(folder), device="cpu", decode="static", speculative="ngram")) as engine:
            engine._core.speculation.propose = lambda request_id, token_ids, room: [7] * min(room, 2)
            result = engine.generate(requests(PROMPTS[:1], GREEDY)[0])
            assert result.error is None and result.stats.spec_proposed > 0
            return engine._core.speculation.draft_length.step_times.weight

    assert fitted_weight(itertools.count()) == 0
    assert fitted_weight(itertools.repeat(0)) > 0


@pytest.mark.slow  # ~30 s each (bf16 engines through interpreted Triton kernels): the README command's budget
@pytest.mark.parametrize("model_type", ["qwen3_moe", "deepseek_v3"])
def test_static_verify_rows_have_the_decode_steps_bits_with_the_triton_kernels(tiny_model_dir, model_type,
                                                                               monkeypatch):
    """With CUDA's decode kernels (here under Triton's interpreter) and bf16, every verify step on the static path:
    the token ids and logprobs are bitwise those of one-token steps."""
    pytest.importorskip("triton", reason="the decode kernels need Triton")
    folder = tiny_model_dir(model_type)
    options = dict(dtype="bfloat16", attention="triton")
    plain, _ = run(folder, **options)
    paths = StepPaths(monkeypatch)
    drafted, accepted = run(folder, reference_of(plain), speculative="ngram", **options)
    assert drafted == plain
    assert accepted > 0 and paths.padded > 0 and paths.dynamic == 0


def test_static_verify_steps_past_the_small_step_limit(tiny_model_dir, monkeypatch):
    """A verify step with more (token, expert) entries than a small step holds (Qwen3-30B's 9 rows of 8 experts
    past GATHER_MAX_ENTRIES 64) runs its experts the large step's way between the static dense parts."""
    from engine.experts.routing import dispatch

    folder = tiny_model_dir("qwen3_moe")
    top_k = read_args(folder).num_experts_per_tok
    plain, _ = run(folder)
    monkeypatch.setattr(dispatch, "GATHER_MAX_ENTRIES", 2 * top_k)  # a step of 3 rows or more is large
    paths = StepPaths(monkeypatch)
    for options in (dict(), dict(experts="paged", expert_slots=2 * top_k)):
        drafted, accepted = run(folder, reference_of(plain), speculative="ngram", **options)
        assert_same(drafted, plain)
        assert accepted > 0
    assert paths.padded > 0 and paths.dynamic == 0
