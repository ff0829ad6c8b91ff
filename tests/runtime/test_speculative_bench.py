"""`wisp bench --speculative ngram --accept-rate R`: random weights verify drafts accepted at the stated rate, the
trace replaying the drafts' positions as the next decode tokens; the rows say what they assume."""

from __future__ import annotations

import json

import pytest
import torch

from engine.cli import main
from engine.generation.speculative.replay import AcceptanceReplay


def test_replay_accepts_each_draft_at_the_stated_rate():
    replay, logits = AcceptanceReplay(0.6, seed=1), torch.zeros(3, 10)
    runs = [len(replay.tokens(logits, [1, 2])[0]) - 1 for _ in range(20000)]
    assert sum(r >= 1 for r in runs) / len(runs) == pytest.approx(0.6, abs=0.02)
    assert sum(r == 2 for r in runs) / sum(r >= 1 for r in runs) == pytest.approx(0.6, abs=0.02)


@pytest.mark.slow

def test_bench_replays_a_stated_acceptance(tmp_path, capsys):
    assert main(["bench", "--shape", "qwen3-topology-tiny", "--trace", "resources/traces/qwen3-twin_chat.npz",
                 "--budgets", "0.75", "--prompt", "16", "--tokens", "24", "--runs", "1", "--max-len", "128",
                 "--device", "cpu", "--arms", "wisp", "--speculative", "ngram", "--accept-rate", "0.75",
                 "--draft-tokens", "4", "--out", str(tmp_path)]) == 0
    rows = json.loads((tmp_path / "qwen3-topology-tiny-b1-p16-qwen3-twin_chat.json").read_text())["rows"]
    for row in rows:
        assert row["speculative"] == "ngram" and row["assumed_accept_rate"] == 0.75, row
        assert row["verify_steps"] > 0 and 0 < row["spec_accepted"] < row["spec_proposed"]
        assert all(len(tokens) == 24 for tokens in row["tokens"])
        assert row["verify_misses"] > 0  # the union of the verified positions' experts, paged


def test_an_acceptance_outside_0_1_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_status:  # the suite's own argparse: usage and status 2
        main(["bench", "--shape", "qwen3-topology-tiny", "--trace", "resources/traces/qwen3-twin_chat.npz",
              "--speculative", "ngram", "--accept-rate", "1.5", "--out", str(tmp_path)])
    assert exit_status.value.code == 2
    assert "acceptance rate is 0 to 1" in capsys.readouterr().err
