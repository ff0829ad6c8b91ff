"""engine.bench.phases: the phase-switching workload for the online controller, on the CPU at a tiny shape."""

from __future__ import annotations

import argparse
import json

import pytest

from engine.bench import phases


def test_every_arm_runs_every_phase_with_the_same_tokens(tmp_path, capsys):
    phases.main(["--shape", "qwen3-topology-tiny", "--trace", "resources/traces/qwen3-twin_multi_turn.npz",
                 "--budget", "0.75", "--burst", "3x40+4", "--chat", "2x16+6", "--cycles", "1", "--device", "cpu",
                 "--max-len", "128", "--out", str(tmp_path)])
    result = json.loads((tmp_path / "phases-qwen3-topology-tiny-0.75GiB.json").read_text())
    rows = {row["arm"]: row for row in result["rows"]}
    assert {"configured", "online"} <= set(rows) and any(name.startswith("static-kv-") for name in rows)
    for row in rows.values():
        assert set(row["phases"]) == {"burst0", "chat0"} and row["total_s"] > 0
        assert row["phases"]["chat0"]["preemptions"] == 0  # one chat at a time always fits
        assert row["phases"]["burst0"]["graph_captures"] == 0  # no CUDA graphs on the CPU
        assert isinstance(row["phases"]["burst0"]["triton_compiles"], list)
        assert len(row["phases"]["chat0"]["ttft_s"]) == 2 and min(row["phases"]["chat0"]["ttft_s"]) > 0
        barrier_s = sum(phase["barrier_s"] for phase in row["phases"].values())
        assert (barrier_s > 0) == (row["arm"] == "online") and barrier_s >= row["plan_stall_s"]
        assert row["same_tokens_as_first"], row["arm"]  # where the bytes sit never changes a token
        assert len(row["tokens"]) == 3 + 2
        assert row["plan_stall_s"] >= 0 and (row["plan_stall_s"] > 0) == (row["plan_changes"] > 0)
    assert "x; results:" in capsys.readouterr().out


def test_chosen_arms_only_and_rows_written_as_they_finish(tmp_path, capsys):
    phases.main(["--shape", "qwen3-topology-tiny", "--trace", "resources/traces/qwen3-twin_multi_turn.npz",
                 "--budget", "0.75", "--burst", "2x40+4", "--chat", "1x16+6", "--cycles", "1", "--device", "cpu",
                 "--max-len", "128", "--arms", "static", "--static-kv", "0.5,0.65", "--out", str(tmp_path)])
    rows = json.loads((tmp_path / "phases-qwen3-topology-tiny-0.75GiB.json").read_text())["rows"]
    assert [row["arm"].split("-")[0] for row in rows] == ["static", "static"]
    assert rows[0]["kv_gib"] < rows[1]["kv_gib"] and all(row["same_tokens_as_first"] for row in rows)
    out = capsys.readouterr().out
    assert "same tokens as static-kv-" in out and "x; results:" not in out  # no online arm to compare


def test_a_static_split_that_cannot_fit_is_refused_by_name(tmp_path):
    with pytest.raises(SystemExit, match="no arm to run: none of --arms static fits 0.75 GiB"):
        phases.main(["--shape", "qwen3-topology-tiny", "--trace", "resources/traces/qwen3-twin_multi_turn.npz",
                     "--budget", "0.75", "--device", "cpu", "--max-len", "128", "--arms", "static",
                     "--static-kv", "50", "--out", str(tmp_path)])


def test_unknown_arm_is_refused(capsys):
    with pytest.raises(SystemExit):
        phases.main(["--trace", "t.npz", "--arms", "online,dynamic", "--out", "x"])
    assert "not dynamic" in capsys.readouterr().err


def test_phase_spec():
    assert phases.parse_phase("4x3072+16") == (4, 3072, 16)
    for bad in ("4x3072", "ax1+2", "0x10+1"):
        with pytest.raises(argparse.ArgumentTypeError, match="COUNTxPROMPT"):
            phases.parse_phase(bad)
