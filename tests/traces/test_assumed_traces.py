"""The shipped gpt-oss-20b and GLM-4.5-Air traces: made by `wisp trace synth` from the assumed statistics that
resources/traces/STATS.md states, with the routing topology of their benchmark shapes."""

from pathlib import Path

import numpy as np
import pytest

from engine.model.shapes import SHAPES
from engine.traces import format as trace_format
from engine.traces.stats import experts_to_cover, popularity, previous_token_reuse, random_routing
from engine.traces.synth import spec_for_shape, synthesize

TRACES = Path(__file__).resolve().parents[2] / "resources" / "traces"
ASSUMED = {  # file -> (shape, carry-over, experts covering 90%, top expert's share), as STATS.md states them
    "gpt-oss-assumed_chat-carry42": ("gpt-oss-20b", 0.42, 16, 0.172),
    "glm45air-assumed_chat-carry30": ("glm-4.5-air", 0.30, 65, 0.043),
}


@pytest.mark.parametrize("name", sorted(ASSUMED))
def test_assumed_trace_has_its_shape_topology_and_measures_its_statistics(name):
    shape, carry_over, cover90, top_share = ASSUMED[name]
    trace = trace_format.load(TRACES / f"{name}.npz")
    h, args = trace.header, SHAPES[shape]
    assert (h.model_type, h.num_layers, h.num_experts, h.top_k) == (
        args.model_type, args.num_moe_layers, args.num_experts, args.num_experts_per_tok)
    assert h.notes["carry_over"] == carry_over and h.notes["seed"] == 0
    assert previous_token_reuse(trace, decode_only=True) == pytest.approx(carry_over, abs=0.01)
    shares = popularity(trace)
    assert experts_to_cover(shares).mean() == pytest.approx(cover90, abs=0.5)
    assert shares.max(axis=1).mean() == pytest.approx(top_share, abs=0.002)


def test_gpt_oss_trace_is_what_its_documented_command_makes():
    trace = trace_format.load(TRACES / "gpt-oss-assumed_chat-carry42.npz")
    again = synthesize(spec_for_shape("gpt-oss-20b", carry_over=0.42, cover90=16, top_share=0.172,
                                      requests=8, prompt=512, tokens=128, seed=0))
    np.testing.assert_array_equal(trace.expert_ids, again.expert_ids)
    assert trace.header == again.header


def test_random_routing_keeps_the_steps_and_has_random_reuse():
    trace = trace_format.load(TRACES / "gpt-oss-assumed_chat-carry42.npz")
    baseline = random_routing(trace)
    np.testing.assert_array_equal(baseline.num_tokens, trace.num_tokens)
    np.testing.assert_array_equal(baseline.seq_ids, trace.seq_ids)
    assert all(len(set(row)) == 4 for row in baseline.expert_ids[:200].reshape(-1, 4).tolist())
    assert previous_token_reuse(baseline, decode_only=True) == pytest.approx(4 / 32, abs=0.01)
