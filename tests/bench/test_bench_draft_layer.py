"""`wisp bench --speculative mtp`: the shape's draft layer, with random weights, is counted in the plans as the
engine's builder counts a checkpoint's, and runs at every proposal for its cost, while the drafts verified and their
acceptance stay the replay's; the rows say the drafter's cost is in."""

from __future__ import annotations

import json
from types import SimpleNamespace

import torch

from engine.alloc.memory_plan import GiB
from engine.bench.draft_layer import with_planned_draft_layer
from engine.bench.suite import session_weights, shape_plan
from engine.cli import main
from engine.generation.speculative.replay import AcceptanceReplay, ReplayedDrafter
from engine.model.loader import LoadedWeights
from engine.model.mtp_sizes import draft_layer_bytes
from engine.model.shapes import shape
from engine.runtime.speculation import Speculation

TRACE = "resources/traces/qwen3-twin_chat.npz"


def test_the_plan_counts_the_draft_layer_as_the_builder_does():
    args = shape("qwen3.5-35b-a3b")
    marked = with_planned_draft_layer(LoadedWeights(args, None, None, torch.bfloat16)).args
    off, mtp = (shape_plan(a, "paged", 12 * GiB, None, 1, 1024) for a in (args, marked))
    assert mtp.dense_bytes - off.dense_bytes == draft_layer_bytes(args, 2, has_head=False) > 1 * GiB
    assert mtp.kv_block_bytes * args.num_kv_layers == off.kv_block_bytes * (args.num_kv_layers + 1)
    assert mtp.total_bytes <= 12 * GiB and sum(mtp.layer_slots) < sum(off.layer_slots)  # the same budget


def test_only_mtp_sessions_of_a_family_with_a_draft_layer_plan_one():
    weights = LoadedWeights(shape("qwen3.5-35b-a3b"), None, None, torch.bfloat16)
    bench = dict(speculative="mtp", draft_layer="run")
    assert session_weights(weights, SimpleNamespace(**bench)).args.extra
    assert session_weights(weights, SimpleNamespace(**{**bench, "speculative": "ngram"})) is weights
    assert session_weights(weights, SimpleNamespace(**{**bench, "draft_layer": "skip"})) is weights
    mixtral = LoadedWeights(shape("mixtral-8x7b"), None, None, torch.bfloat16)
    assert session_weights(mixtral, SimpleNamespace(**bench)) is mixtral


class CountingDrafter:
    def __init__(self):
        self.calls = []

    def propose(self, request_id, token_ids, num_drafts):
        self.calls.append(num_drafts)
        return [7] * (num_drafts - 1)  # one fewer: as where the KV pool had no block for the last

    def forget(self, request_id):
        pass


def test_the_drafter_runs_at_every_proposal_and_the_replay_gives_the_drafts():
    drafter = CountingDrafter()
    replayed = ReplayedDrafter(drafter, AcceptanceReplay(0.8), vocab_size=1000)
    speculation = Speculation(4, AcceptanceReplay(0.8), 1000, drafter=replayed)
    drafts = speculation.propose("r", [1, 2, 3], 3)
    assert drafter.calls == [3] and len(drafts) == 2 and drafts != [7, 7]
    assert replayed.num_drafted == 2 and replayed.drafting_s > 0
    assert speculation.step_drafting_s > 0 and speculation.draft_length.num_drafted == 2  # the rule counts it


def test_a_bench_row_of_mtp_runs_the_draft_layer(tmp_path):
    assert main(["bench", "--shape", "qwen3-topology-tiny", "--layers", "4", "--trace", TRACE, "--budgets", "0.75",
                 "--prompt", "16", "--tokens", "16", "--runs", "1", "--max-len", "128", "--device", "cpu",
                 "--arms", "resident,wisp", "--speculative", "mtp", "--accept-rate", "0.75", "--draft-tokens", "3",
                 "--out", str(tmp_path), "--also", f"--speculative ngram --out {tmp_path / 'ngram'}"]) == 0
    rows = json.loads((tmp_path / "qwen3-topology-tiny-b1-p16-qwen3-twin_chat.json").read_text())["rows"]
    assert [row["arm"] for row in rows] == ["resident", "wisp"]
    for row in rows:
        assert "error" not in row, row
        assert row["drafter"].startswith("mtp layer run") and row["assumed_accept_rate"] == 0.75
        assert row["drafts_run"] > 0 and row["drafting_s"] > 0 and row["spec_proposed"] > 0
        assert row["plan_gib"] <= (row["budget_gib"] or float("inf"))
    ngram = json.loads((tmp_path / "ngram" / "qwen3-topology-tiny-b1-p16-qwen3-twin_chat.json").read_text())["rows"]
    assert all("drafter" not in row and "drafts_run" not in row for row in ngram)


def test_the_attached_draft_layer_holds_the_bytes_its_plan_counts():
    from engine.bench.draft_layer import attach_random_drafter
    from engine.bench.suite import plan_for
    from engine.bench.synthetic import IdOnlyTokenizer, synthetic_weights
    from engine.config import EngineOptions
    from engine.runtime.builder import assemble_engine

    cpu = torch.device("cpu")
    weights = synthetic_weights(shape("glm-4.5-air-topology-tiny", 3), cpu, experts_on_host=False,
                                dtype=torch.bfloat16)  # the plans count bf16
    marked = with_planned_draft_layer(weights)
    off, plan = (plan_for(w, "resident", None, None, 1, 128) for w in (weights, marked))
    options = EngineOptions(device="cpu", experts="resident", max_num_seqs=1, speculative="mtp")
    engine = assemble_engine(marked, IdOnlyTokenizer(), options, plan, cpu, 128)
    draft = attach_random_drafter(engine, marked, cpu).draft
    loaded = sum(p.numel() * p.element_size() for p in draft.layer.parameters())
    loaded += draft.experts.blocks.numel() * draft.experts.blocks.element_size()
    assert loaded == plan.dense_bytes - off.dense_bytes
    pools = [t for pool in engine.runner.cache.pools() for t in pool]
    assert sum(t.numel() * t.element_size() for t in pools) == plan.kv_bytes
