"""bench/arm_order_probe.py on the CPU: each arm at its own prompt length, bad steps refused by name."""

import json
import sys

import pytest

from bench import arm_order_probe

TINY = ["--shape", "qwen3-topology-tiny", "--device", "cpu", "--trace", "resources/traces/qwen3-twin_chat.npz",
        "--max-len", "128", "--tokens", "4", "--runs", "1"]


def probe(monkeypatch, *options):
    monkeypatch.setattr(sys, "argv", ["arm_order_probe.py", *TINY, *options])
    arm_order_probe.main()


def test_each_arm_runs_at_the_prompt_length_it_names(monkeypatch, tmp_path):
    out = tmp_path / "rows.json"
    probe(monkeypatch, "--prompt", "16", "--sequence", "resident@64,paged-all", "--out", str(out))
    rows = json.loads(out.read_text())
    assert [(row["arm"], row["prompt"]) for row in rows] == [("resident", 64), ("paged-all", 16)]
    assert all(row["cuda_graphs_before"] == 0 for row in rows)  # the CPU captures no CUDA graph


@pytest.mark.parametrize("step, message", [("resident@125", "1 to 124"), ("resident@0", "1 to 124"),
                                           ("resident@x", "1 to 124"), ("rates@64", "only an arm")])
def test_a_bad_prompt_length_is_refused_before_the_weights_are_built(monkeypatch, capsys, step, message):
    with pytest.raises(SystemExit) as exit_info:
        probe(monkeypatch, "--sequence", step)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err
