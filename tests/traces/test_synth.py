"""`wisp trace synth`: traces made from stated statistics must measure back (through engine.traces.stats, what
`wisp trace stats` prints) to the carry-over and popularity they were asked for."""

import argparse
import dataclasses
import json
import math

import numpy as np
import pytest

from engine.traces import format as trace_format
from engine.cli.trace import register
from engine.traces.stats import experts_to_cover, popularity, previous_token_reuse
from engine.traces.synth import PUBLISHED, Popularity, SynthError, cover, fit_popularity, spec_for_shape, synthesize

SMALL = dict(requests=3, prompt=24, tokens=48)  # 216 rows of the full 48-layer shape


def run_cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.handler(args)


@pytest.mark.parametrize("carry_over, popularity_args", [
    (0.44, {}), (0.48, {}), (0.30, {"skew": 0.6}), (0.65, {"cover90": 90, "top_share": 0.03}),
])
def test_carry_over_measures_as_requested(carry_over, popularity_args):
    trace = synthesize(spec_for_shape("qwen3-30b-a3b", carry_over=carry_over, **popularity_args, **SMALL))
    assert previous_token_reuse(trace, decode_only=True) == pytest.approx(carry_over, abs=0.02)


@pytest.mark.parametrize("popularity_args", [{}, {"skew": 0.6}, {"cover90": 90, "top_share": 0.03}])
def test_popularity_measures_as_requested(popularity_args):
    # Four layers and many rows: a short trace's measured cover falls below the law's (sampling noise makes
    # the sorted shares look skewed), so the check needs a large sample, which the full shape would make slow.
    spec = spec_for_shape("qwen3-30b-a3b", carry_over=0.46, **popularity_args, requests=8, prompt=1500, tokens=500)
    trace = synthesize(dataclasses.replace(spec, num_layers=4))
    shares, law = popularity(trace), spec.popularity.shares(spec.num_experts)
    assert experts_to_cover(shares).mean() == pytest.approx(math.ceil(cover(law)), abs=1.0)
    assert shares.max(axis=1).mean() == pytest.approx(law[0], abs=0.002)


def test_published_defaults_are_the_published_figures():
    spec = spec_for_shape("qwen3-30b-a3b", **SMALL)
    law = spec.popularity.shares(128)
    published = PUBLISHED["qwen3-30b-a3b"]
    assert spec.carry_over == published["carry_over"] == 0.46
    assert math.ceil(cover(law)) == published["cover90"] == 65
    assert law[0] == pytest.approx(published["top_share"], abs=1e-4)
    assert (spec.num_layers, spec.num_experts, spec.top_k) == (48, 128, 8)


def test_fit_popularity_reaches_other_targets():
    law = fit_popularity(64, 30, 0.08)
    assert math.ceil(cover(law.shares(64))) == 30
    assert law.shares(64)[0] == pytest.approx(0.08, abs=1e-4)
    assert Popularity(0.0).shares(16) == pytest.approx(np.full(16, 1 / 16))


def test_same_seed_same_trace_other_seed_other_trace():
    spec = spec_for_shape("mixtral-8x7b", skew=0.3, **SMALL)
    first, again, other = synthesize(spec), synthesize(spec), synthesize(dataclasses.replace(spec, seed=1))
    np.testing.assert_array_equal(first.expert_ids, again.expert_ids)
    assert first.header == again.header
    assert not np.array_equal(first.expert_ids, other.expert_ids)


def test_header_steps_and_trace_router(tmp_path):
    from engine.bench.trace_router import MIN_DECODE_ROWS, TraceRouter

    assert run_cli(["trace", "synth", "--shape", "qwen3-30b-a3b", "--carry-over", "0.46", "--requests", "3",
                    "--prompt", "20", "--tokens", str(MIN_DECODE_ROWS + 4), "--seed", "3",
                    "--out", str(tmp_path / "t.npz")]) == 0
    trace = trace_format.load(tmp_path / "t.npz")  # validates shapes and ids
    h = trace.header
    assert (h.model, h.model_type, h.num_layers, h.num_experts, h.top_k) == ("Qwen3-30B-A3B", "qwen3_moe", 48, 128, 8)
    assert h.workload == "synthetic"
    assert h.notes["carry_over"] == 0.46 and h.notes["seed"] == 3 and h.notes["generator"] == "wisp trace synth"
    assert trace.is_prefill.tolist() == ([True] + [False] * 20) * 3
    assert trace.num_tokens.tolist() == ([20] + [1] * 20) * 3
    for row in trace.expert_ids.reshape(-1, 8):  # top-k ids are distinct experts
        assert len(set(row.tolist())) == 8
    router = TraceRouter(trace, device="cpu")
    assert len(router.streams) == 3
    assert all(len(prompt) == 20 and len(decode) == 20 for prompt, decode in router.streams)


def test_stats_command_reports_the_carry_over(tmp_path, capsys):
    path = tmp_path / "m.npz"
    assert run_cli(["trace", "synth", "--shape", "mixtral-8x7b", "--popularity-skew", "0.3", "--requests", "2",
                    "--prompt", "8", "--tokens", "150", "--out", str(path)]) == 0
    capsys.readouterr()
    assert run_cli(["trace", "stats", str(path), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["workload"] == "synthetic" and stats["top_k"] == 2
    assert stats["previous_token_reuse_decode"] == pytest.approx(PUBLISHED["mixtral-8x7b"]["carry_over"], abs=0.02)


@pytest.mark.parametrize("argv, message", [
    (["--shape", "olmoe-1b-7b"], "no published carry-over for olmoe-1b-7b"),
    (["--shape", "mixtral-8x7b"], "no published popularity for mixtral-8x7b"),
    (["--carry-over", "0.05"], "out of reach"),
    (["--carry-over", "1.5"], "not a share"),
    (["--cover90", "200"], "out of range"),
    (["--popularity-skew", "2"], "exceeds 1/top_k"),
    (["--popularity-skew", "1", "--cover90", "40"], "either"),
    (["--popularity-skew", "-0.5"], "at least 0"),
    (["--cover90", "30", "--top-share", "0.01"], "cannot go with"),
])
def test_user_errors_name_the_problem(tmp_path, argv, message):
    with pytest.raises(SynthError, match=message):
        run_cli(["trace", "synth", *argv, "--requests", "1", "--prompt", "2", "--tokens", "2",
                 "--out", str(tmp_path / "t.npz")])
    assert not (tmp_path / "t.npz").exists()


def test_cli_exit_status_2_without_traceback(tmp_path, capsys):
    from engine.cli import main

    assert main(["trace", "synth", "--shape", "olmoe-1b-7b", "--out", str(tmp_path / "t.npz")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "pass --carry-over" in err
