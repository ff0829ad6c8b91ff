"""`wisp configure` on a trace of the model's own topology."""

import json

import numpy as np
import pytest

from engine.cli import main
from engine.traces.format import Trace, TraceHeader, save


def random_walk_trace(num_layers=2, num_experts=8, top_k=2, steps=300, seed=0) -> Trace:
    rng = np.random.default_rng(seed)
    rows = np.stack([[rng.choice(num_experts // 2 + (s // 100), top_k, replace=False) for _ in range(num_layers)]
                     for s in range(steps)]).astype(np.uint8)  # [N, L, K]: the working set grows over time
    header = TraceHeader("tiny", "qwen3_moe", num_layers, num_experts, top_k, "test")
    return Trace(header, np.zeros(steps, bool), np.ones(steps, np.int32), rows, np.zeros(steps, np.int32))


@pytest.fixture
def trace_file(tmp_path):
    path = tmp_path / "trace.npz"
    save(random_walk_trace(), path)
    return path


def test_configure_prints_plan_beside_baselines(tiny_model_dir, trace_file, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    capsys.readouterr()
    code = main(["configure", str(tiny_model_dir("qwen3_moe")), "--budget", "1GiB", "--trace", str(trace_file),
                 "--device", "cpu", "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    splits = result["splits"]
    configured, oracle = splits["configured"], splits["oracle"]
    assert configured["feasible"] and configured["kv_gib"] >= result["kv_floor_gib"]
    assert configured["predicted_decode_tok_s"] >= 0.97 * oracle["predicted_decode_tok_s"]
    assert len(configured["layer_slots"]) == 2
    assert (tmp_path / "cache" / "wisp").is_dir()  # the link probe was cached


def test_configure_refuses_a_trace_of_another_topology(tiny_model_dir, tmp_path, capsys):
    path = tmp_path / "other.npz"
    save(random_walk_trace(num_layers=3), path)
    capsys.readouterr()
    code = main(["configure", str(tiny_model_dir("qwen3_moe")), "--budget", "1GiB", "--trace", str(path), "--device", "cpu"])
    assert code == 2 and "3 layers" in capsys.readouterr().err


def test_configure_runs_on_the_demo_by_default_with_its_trace(capsys):
    capsys.readouterr()
    assert main(["configure", "--budget", "1GiB", "--device", "cpu"]) == 0
    assert "dense weights 14.1 MiB" in capsys.readouterr().out
    named = main(["configure", "demo", "--budget", "1GiB", "--device", "cpu"])
    out = capsys.readouterr().out
    assert named == 0 and "dense weights 14.1 MiB" in out
    rows = [line for line in out.splitlines() if "-16 " in line]
    assert len(rows) == len(set(rows))  # a row equal to another is printed once
    assert "GiB" not in out.split("|")[0] and "KiB" not in out


def test_configure_names_the_minimum_budget(capsys):
    capsys.readouterr()
    assert main(["configure", "--budget", "690MiB", "--device", "cpu"]) == 2
    error = capsys.readouterr().err
    assert "minimum of 690.2 MiB" in error and "--budget 690.2MiB" in error and len(error.strip().splitlines()) == 1


def test_configure_asks_for_a_trace_where_the_model_has_none(tiny_model_dir, capsys):
    capsys.readouterr()
    assert main(["configure", str(tiny_model_dir("qwen3_moe")), "--budget", "1GiB", "--device", "cpu"]) == 2
    assert "--trace is needed" in capsys.readouterr().err
