"""The benchmark harness end to end on the CPU, at toy width with the Qwen3-30B-A3B expert topology and its trace."""

import json

from engine.bench.report import table
from engine.cli import main


def test_bench_suite_runs_every_arm_and_reports(tmp_path):
    assert main(["bench", "--shape", "qwen3-topology-tiny", "--trace", "resources/traces/qwen3-twin_chat.npz",
                 "--budgets", "0.75", "--prompt", "16", "--tokens", "4", "--runs", "1", "--max-len", "128",
                 "--device", "cpu", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "qwen3-topology-tiny-b1-p16.json").read_text())
    arms = {row["arm"] for row in result["rows"]}
    assert {"resident", "paged-all-resident", "wisp", "wisp-online", "wisp+prefetch", "static-uva", "static-copy"} <= arms
    assert not [row for row in result["rows"] if "error" in row]
    tokens = {row["arm"]: row["tokens"][0] for row in result["rows"]}
    assert tokens["wisp"] == tokens["resident"] == tokens["static-uva"] == tokens["wisp-online"]  # identical outputs
    assert tokens["static-copy"] == tokens["resident"][: len(tokens["static-copy"])]  # it runs fewer tokens
    assert "| wisp | 0.75 |" in table(result)
