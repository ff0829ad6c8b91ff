"""bench.phases: the phase-switching workload for the online controller, on the CPU at a tiny shape."""

from __future__ import annotations

import argparse
import json

import pytest

from bench import phases, phases_summary
from engine.bench.suite import bench_sizes


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
        decisions = [reason for phase in row["phases"].values() for reason in phase["decisions"]]
        assert len(decisions) == row["plan_changes"] and all(isinstance(r, str) and r for r in decisions)
        assert all(phase["kv_gib_start"] > 0 for phase in row["phases"].values())
        assert row["same_tokens_as_first"], row["arm"]  # where the bytes sit never changes a token
        assert len(row["tokens"]) == 3 + 2
        assert row["plan_stall_s"] >= 0 and (row["plan_stall_s"] > 0) == (row["plan_changes"] > 0)
    assert "x; results:" in capsys.readouterr().out
    assert result["summary"]["online_s"] == rows["online"]["total_s"] and result["summary"]["ceiling"] >= 1.0


def test_summary_compares_online_with_the_best_static_and_the_per_phase_ceiling():
    def row(arm, burst, chat):
        return {"arm": arm, "total_s": burst + chat, "phases": {"burst0": {"wall_s": burst}, "chat0": {"wall_s": chat}}}

    rows = [row("configured", 10.0, 20.0), row("online", 10.5, 18.0), row("static-kv-0.9", 16.0, 17.0)]
    result = phases_summary.summary(rows)
    assert result["best_static"] == "configured" and result["best_static_s"] == 30.0
    assert result["online_speedup"] == 30.0 / 28.5
    assert result["per_phase_best_s"] == 10.0 + 17.0 and result["ceiling"] == 30.0 / 27.0  # online is not a static
    assert phases_summary.summary([row("configured", 1.0, 1.0)]) is None  # nothing to compare


def test_chosen_arms_only_and_rows_written_as_they_finish(tmp_path, capsys):
    phases.main(["--shape", "qwen3-topology-tiny", "--trace", "resources/traces/qwen3-twin_multi_turn.npz",
                 "--budget", "0.75", "--burst", "2x40+4", "--chat", "1x16+6", "--cycles", "1", "--device", "cpu",
                 "--max-len", "128", "--arms", "static", "--static-kv", "0.5,0.65", "--out", str(tmp_path)])
    rows = json.loads((tmp_path / "phases-qwen3-topology-tiny-0.75GiB.json").read_text())["rows"]
    assert [row["arm"].split("-")[0] for row in rows] == ["static", "static"]
    assert rows[0]["kv_gib"] < rows[1]["kv_gib"] and all(row["same_tokens_as_first"] for row in rows)
    out = capsys.readouterr().out
    assert "same tokens as static-kv-" in out and "x; results:" not in out  # no online arm to compare


def test_arms_run_in_the_order_asked():
    args = argparse.Namespace(budget=0.75, burst=(2, 40, 4), max_len=128, static_kv=[0.65, 0.5],
                              arms=["static", "online", "configured"])
    model_args = phases.shape_of(argparse.Namespace(shape="qwen3-topology-tiny", layers=None))
    weights = argparse.Namespace(args=model_args, store=argparse.Namespace(expert_bytes=bench_sizes(model_args).expert_bytes),
                                 dense_bytes=None)
    trace = phases.load_trace("resources/traces/qwen3-twin_multi_turn.npz")
    link = phases.LinkCost(50e9, 20e-6, 0.012, 0.0004)
    names = [name for name, _, _ in phases.arms(weights, args, trace, link)]
    assert names[-2:] == ["online", "configured"] and len(names) == 4
    assert all(name.startswith("static-kv-") for name in names[:2]) and names[0] > names[1]  # as --static-kv


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


def test_parts_of_one_workload_merge_into_one_verdict(tmp_path, capsys):
    def part(arms, name, tokens=((1, 2),), **facts):
        rows = [{"arm": arm, "total_s": burst + chat, "budget_gib": 12.0, "tokens": [list(t) for t in tokens],
                 "phases": {"burst0": {"wall_s": burst}, "chat0": {"wall_s": chat}}} for arm, burst, chat in arms]
        path = tmp_path / name
        path.write_text(json.dumps({"facts": {"shape": "s", "trace": "t", "burst": [4, 10, 1], **facts}, "rows": rows}))
        return str(path)

    online = part([("online", 10.5, 18.0), ("configured", 10.0, 20.0)], "a.json")
    statics = part([("static-kv-0.9", 16.0, 17.0), ("static-kv-1.9", 11.0, 18.5)], "b.json")
    phases_summary.main([online, statics, "--out", str(tmp_path / "merged.json")])
    merged = json.loads((tmp_path / "merged.json").read_text())
    assert merged["summary"]["best_static"] == "static-kv-1.9" and merged["summary"]["online_speedup"] == 29.5 / 28.5
    assert merged["summary"]["per_phase_best_s"] == 10.0 + 17.0 and merged["parts"] == 2
    assert "1.04x" in capsys.readouterr().out
    other = part([("static-kv-2.5", 12.0, 19.0)], "c.json", burst=[8, 10, 1])
    with pytest.raises(SystemExit):
        phases_summary.main([online, other])
    assert "burst differ" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        phases_summary.main([online, online])
    assert "arms in more than one part: configured, online" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        phases_summary.main([online, part([("static-kv-3", 12.0, 19.0)], "d.json", tokens=((1, 3),))])
    assert "tokens differ from online's in: static-kv-3" in capsys.readouterr().err
