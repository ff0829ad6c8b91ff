"""`wisp bench` at the gpt-oss-20b and GLM-4.5-Air topologies on the CPU (toy width, their first 8 layers, their
assumed-locality traces): every arm runs, pages at a budget below the experts, and gives resident's tokens."""

import argparse
import json

import pytest

from engine.bench.shapes import shape_of
from engine.cli import main
from engine.model.shapes import shape

CASES = {  # toy-width shape -> (full shape, trace, a budget in GiB that pages: the KV floor is 0.5 GiB)
    "gpt-oss-20b-topology-tiny": ("gpt-oss-20b", "gpt-oss-assumed_chat-carry42", "0.568"),
    "glm-4.5-air-topology-tiny": ("glm-4.5-air", "glm45air-assumed_chat-carry30", "0.572"),
}


@pytest.mark.parametrize("tiny", sorted(CASES))
def test_bench_replays_the_trace_at_the_shapes_topology(tiny, tmp_path):
    full, trace, budget = CASES[tiny]
    assert main(["bench", "--shape", tiny, "--layers", "8", "--trace", f"resources/traces/{trace}.npz",
                 "--budgets", budget, "--prompt", "16", "--tokens", "4", "--runs", "1", "--max-len", "128",
                 "--device", "cpu", "--arms", "resident,wisp,static-uva", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / f"{tiny}-b1-p16-{trace}.json").read_text())
    args = shape(full, 8)
    assert (result["facts"]["num_moe_layers"], result["facts"]["num_experts"]) == (args.num_moe_layers,
                                                                                  args.num_experts)
    rows = {row["arm"]: row for row in result["rows"]}
    assert set(rows) == {"resident", "wisp", "static-uva"} and not [r for r in rows.values() if "error" in r]
    assert rows["wisp"]["slots_per_layer_min"] < args.num_experts and rows["wisp"]["misses"] > 0
    assert rows["static-uva"]["offloaded_layers"] > 0
    assert rows["wisp"]["tokens"] == rows["resident"]["tokens"] == rows["static-uva"]["tokens"]
    assert rows["wisp"]["logprobs"] == rows["resident"]["logprobs"]


def test_a_budget_too_small_for_static_offload_is_a_failed_row_not_a_failed_suite():
    """Static offload streams whole layers, so it needs more than paging's minimum (GLM-4.5-Air's first two
    layers: 8.07 GiB against 4.20): the other arms at that budget still run."""
    from argparse import Namespace

    import torch

    from engine.bench.suite import static_rows
    from engine.bench.synthetic import synthetic_weights

    host = synthetic_weights(shape("gpt-oss-20b-topology-tiny", 2), torch.device("cpu"), experts_on_host=False)
    args = Namespace(batch=1, max_len=128, tokens=4)
    rows = static_rows(host, 1024, ["wisp", "static-uva", "static-copy"], args, torch.device("cpu"), router=None)
    assert [row["arm"] for row in rows] == ["static-uva", "static-copy"]
    assert all(row["error"].startswith("BudgetError: a budget of 1.0 KiB is too small for static") for row in rows)


def test_a_cut_without_an_attention_layer_is_refused_by_name():
    """Nemotron 3 Nano's first five layers are Mamba-2 and MoE blocks: a KV cache needs one attention layer."""
    with pytest.raises(SystemExit, match="--layers 2 of nemotron-3-nano-30b-a3b keeps no attention layer .*layer 5"):
        shape_of(argparse.Namespace(shape="nemotron-3-nano-30b-a3b", layers=2))
    assert shape_of(argparse.Namespace(shape="nemotron-3-nano-30b-a3b", layers=6)).num_kv_layers == 1
