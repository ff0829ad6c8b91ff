"""The benchmark harness end to end on the CPU, at toy width with the Qwen3-30B-A3B expert topology and its trace."""

import json
import shutil

import pytest
import torch

from engine.alloc.memory_plan import GiB, kv_floor_bytes
from bench import report
from bench.report import table
from engine.model.shapes import shape
from engine.bench.suite import expert_share, shape_plan, sweep_plans
from engine.cli import main
from engine.model.sizes import model_sizes

ARMS = "resident,resident-dynamic,paged-all,wisp,wisp-online,wisp-prefetch,static-uva,static-copy,wisp-50-50," \
       "wisp-uniform,wisp-sweep,wisp-host,resident-sdpa-attention,wisp-sdpa-attention,resident-nondeterministic-sdpa"


@pytest.fixture(scope="module")
def bench_json(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    assert main(["bench", "--shape", "qwen3-topology-tiny", "--trace", "resources/traces/qwen3-twin_chat.npz",
                 "--budgets", "0.75", "--prompt", "16", "--tokens", "4", "--runs", "1", "--sweep-runs", "1",
                 "--max-len", "128", "--device", "cpu", "--arms", ARMS, "--label", "ci run", "--out", str(out),
                 "--also", "--batch 2 --arms resident,wisp"]) == 0
    return out / "qwen3-topology-tiny-b1-p16-qwen3-twin_chat.json"


def cells(markdown: str, arm: str) -> dict:
    """The first table row of `arm`, keyed by the table's header."""
    lines = markdown.splitlines()
    header = next(line for line in lines if line.startswith("| arm |"))
    row = next(line for line in lines if line.startswith(f"| {arm} |"))
    return dict(zip((c.strip() for c in header.strip("|").split("|")), (c.strip() for c in row.strip("|").split("|"))))


def row_of(result: dict, arm: str) -> dict:
    return next(r for r in result["rows"] if r["arm"] == arm)


def test_bench_suite_runs_every_arm_and_reports(bench_json):
    result = json.loads(bench_json.read_text())
    arms = {row["arm"] for row in result["rows"]}
    assert {"resident", "paged-all-resident", "wisp", "wisp-online", "wisp+prefetch", "static-uva", "static-copy",
            "wisp-50-50", "wisp-uniform", "wisp-sweep"} <= arms
    assert not [row for row in result["rows"] if "error" in row]
    tokens = {row["arm"]: row["tokens"][0] for row in result["rows"]}
    assert tokens["wisp"] == tokens["resident"] == tokens["static-uva"] == tokens["wisp-online"]  # identical outputs
    assert tokens["wisp-host"] == tokens["resident"]
    assert tokens["wisp-sdpa-attention"] == tokens["resident-sdpa-attention"]  # one attention kernel, any mode
    assert tokens["resident-nondeterministic-sdpa"] == tokens["resident"]  # the CPU's kernels repeat themselves
    assert tokens["wisp-sweep"] == tokens["wisp-50-50"] == tokens["resident"]
    assert tokens["static-copy"] == tokens["resident"][: len(tokens["static-copy"])]  # it runs fewer tokens
    assert "| wisp | 0.75 |" in table(result)


def test_report_checks_every_row_against_resident_bit_for_bit(bench_json):
    result = json.loads(bench_json.read_text())
    markdown = table(result)
    assert cells(markdown, "wisp")["= resident"] == "yes" and cells(markdown, "static-uva")["= resident"] == "yes"
    assert cells(markdown, "resident")["= resident"] == "-"
    wisp = row_of(result, "wisp")
    assert len(wisp["logprobs"][0]) == len(wisp["tokens"][0])
    wisp["logprobs"][0][2] += 1e-6  # one logprob off in its last bits
    assert report.same_as_resident(wisp, row_of(result, "resident")) == "no (token 2)"


def test_a_model_cut_to_its_first_layers_is_configured_from_those_layers_of_the_trace():
    """Mixtral cut to 8 of its 32 layers failed with a negative KV size: the split was planned for 32."""
    from engine.alloc.cost_model import LinkCost
    from engine.bench.suite import mvwsa_plan
    from engine.bench.synthetic import synthetic_weights
    from engine.traces.format import load as load_trace

    args = shape("qwen3-topology-tiny", 6)
    weights = synthetic_weights(args, torch.device("cpu"), experts_on_host=False)
    plan = mvwsa_plan(weights, int(0.75 * GiB), load_trace("resources/traces/qwen3-twin_chat.npz"),
                      LinkCost(20e9, 20e-6, 0.012, 0.0004), batch=1, max_len=128)
    assert len(plan.layer_slots) == 6 and plan.kv_blocks > 0
    assert plan.total_bytes <= plan.budget_bytes


def test_also_runs_another_session_on_the_same_weights(bench_json):
    second = json.loads((bench_json.parent / "qwen3-topology-tiny-b2-p16-qwen3-twin_chat.json").read_text())
    rows = {row["arm"]: row for row in second["rows"]}
    assert set(rows) == {"resident", "wisp"} and all(row["batch"] == 2 for row in rows.values())
    assert rows["wisp"]["tokens"] == rows["resident"]["tokens"] and len(rows["wisp"]["tokens"]) == 2


def test_bench_records_splits_and_provenance(bench_json):
    result = json.loads(bench_json.read_text())
    facts, rows = result["facts"], result["rows"]
    assert facts["label"] == "ci run" and "git_commit" in facts
    assert (facts["num_moe_layers"], facts["num_experts"]) == (48, 128)
    for row in rows:
        is_budgeted_paged = row["mode"] == "paged" and row["budget_gib"] is not None
        assert (row["expert_share"] is not None) == is_budgeted_paged, row["arm"]
        assert row["cuda_graphs_before"] == 0, row["arm"]  # the CPU captures no CUDA graph
    sweep = [row for row in rows if row["arm"] == "wisp-sweep"]
    assert sweep and all(0 < row["expert_share"] <= 1 and len(row["decode_tok_s_runs"]) == 1 for row in sweep)


def test_sweep_spans_the_pool_and_keeps_the_kv_floor():
    qwen3 = shape("qwen3-30b-a3b")
    budget = 24 * GiB
    plans = sweep_plans(qwen3, budget, batch=1, max_len=4096)
    shares = [expert_share(plan) for plan in plans]
    assert len(plans) == 5 and shares == sorted(shares) and shares[0] < 0.35 < 0.9 < shares[-1]
    assert all(plan.kv_bytes >= kv_floor_bytes(model_sizes(qwen3, 2), 1, 4096) for plan in plans)
    assert all(plan.free_bytes >= 0 and len(set(plan.layer_slots)) == 1 for plan in plans)
    assert plans[-1].min_layer_slots == shape_plan(qwen3, "paged", budget, None, 1, 4096).min_layer_slots


def test_report_has_floors_and_the_split_check(bench_json):
    result = json.loads(bench_json.read_text())
    markdown = table(result)
    wisp, resident = cells(markdown, "wisp"), cells(markdown, "resident")
    facts, row = result["facts"], row_of(result, "wisp")
    cold_prompt_s = 48 * 128 * facts["expert_bytes"] / (facts["copy_loop_gb_s"] * 1e9)  # every expert once
    assert wisp["TTFT / floor"] == f"{row['ttft_s'] / (cold_prompt_s + row_of(result, 'resident')['ttft_s']):.2f}"
    assert wisp["miss H2D GB/s"] == f"{row['h2d_bytes'] / row['copy_s'] / 1e9:.1f}"
    assert wisp["expert share"] == f"{row['expert_share']:.2f}" and float(wisp["run / floor"]) >= 0
    assert resident["TTFT / floor"] == "-" and resident["expert share"] == "-"
    split = markdown[markdown.index("### Split check"):]
    configured = row["decode_tok_s"]
    best = max(r["decode_tok_s"] for r in result["rows"] if r["arm"] == "wisp-sweep")
    assert f"| 0.75 | {configured:.1f} |" in split and f"| {configured / best:.2f} |" in split


def test_report_without_resident_row_and_with_a_failed_arm(bench_json):
    result = json.loads(bench_json.read_text())
    failed = {"arm": "wisp", "budget_gib": 8.0, "expert_share": None, "error": "BudgetError: too small"}
    result["rows"] = [r for r in result["rows"] if r["arm"] != "resident"] + [failed]
    markdown = table(result)
    wisp = cells(markdown, "wisp")
    assert (wisp["TTFT / floor"], wisp["run / floor"]) == ("-", "-")
    assert "No resident row" in markdown and "Failed arm: wisp at 8.0 GiB: BudgetError: too small" in markdown


def test_report_writes_one_markdown_and_plots_per_json(bench_json, tmp_path):
    second = tmp_path / "qwen3-topology-tiny-b4-p16.json"
    shutil.copy(bench_json, second)
    report.main([str(bench_json), str(second), "--out", str(tmp_path / "report")])
    markdown = (tmp_path / "report" / "results.md").read_text()
    assert markdown.count("### Split check") == 2
    first = bench_json.stem
    assert f"## {first}\n" in markdown and "## qwen3-topology-tiny-b4-p16\n" in markdown
    for stem in (first, "qwen3-topology-tiny-b4-p16"):
        for name in ("tok_s_vs_budget", "hit_rate_vs_slots", "measured_vs_floor"):
            assert (tmp_path / "report" / f"{stem}-{name}.png").stat().st_size > 1000


def test_report_shows_the_steps_gpu_time_where_a_row_has_it(bench_json):
    """On the CPU no row has it ('-'); a CUDA run's row carries step_gpu_ms, the report prints it."""
    result = json.loads(bench_json.read_text())
    assert all(row.get("step_gpu_ms") is None for row in result["rows"])
    assert cells(table(result), "wisp")["GPU ms/step"] == "-"
    row_of(result, "wisp")["step_gpu_ms"] = 8.754
    markdown = table(result)
    assert cells(markdown, "wisp")["GPU ms/step"] == "8.75" and cells(markdown, "resident")["GPU ms/step"] == "-"
    assert cells(markdown, "wisp")["decode tok/s (median of runs)"] == f"{row_of(result, 'wisp')['decode_tok_s']:.1f}"


def test_decode_floor_counts_only_the_bytes_copied_after_the_prefill(bench_json):
    """The issue's floor is the decode's: misses after every prefill x expert bytes / copy rate + resident decode."""
    result = json.loads(bench_json.read_text())
    facts, wisp, resident = result["facts"], row_of(result, "wisp"), row_of(result, "resident")
    for row in result["rows"]:
        assert 0 <= row["decode_h2d_bytes"] <= row["h2d_bytes"] and 0 <= row["decode_misses"] <= row["misses"]
    assert resident["decode_h2d_bytes"] == 0 == row_of(result, "paged-all-resident")["decode_h2d_bytes"]
    # the cold prompt misses, and so does decode at this budget: both parts are there and they differ
    assert 0 < wisp["decode_h2d_bytes"] < wisp["h2d_bytes"]
    assert wisp["decode_h2d_bytes"] == wisp["decode_misses"] * facts["expert_bytes"]
    tokens = len(wisp["tokens"][0])
    floor = wisp["decode_h2d_bytes"] / (facts["copy_loop_gb_s"] * 1e9) + (tokens - 1) / resident["decode_tok_s"]
    assert cells(table(result), "wisp")["decode / floor"] == f"{(tokens - 1) / wisp['decode_tok_s'] / floor:.2f}"
    del wisp["decode_h2d_bytes"]  # a JSON from before the suite recorded it
    assert cells(table(result), "wisp")["decode / floor"] == "-"


def test_paged_all_runs_right_after_resident_and_before_its_variants(bench_json):
    """On the H200 graphs captured after a process's third ran ~0.9 ms slower a step: the pager's cost is
    measured by the first two engines."""
    arms = [row["arm"] for row in json.loads(bench_json.read_text())["rows"]]
    assert arms[:3] == ["resident", "paged-all-resident", "resident-dynamic"]
    assert arms.index("resident-sdpa-attention") < arms.index("wisp")
