"""`wisp bench --link-gbps`: the rate the floors and the planner use, and the pacing's refusals (its timing is
checked on the H200: tests/gpu/test_decode_step.py)."""

from __future__ import annotations

import argparse

import pytest
import torch

from engine.bench.suite import link_facts, parse_args
from engine.experts.pager.link_pace import LinkPace


def test_the_paced_rate_is_the_slower_of_the_link_and_the_measured_copies():
    args = parse_args(["--trace", "t.npz", "--out", "o", "--link-gbps", "25"])
    assert link_facts(args, 52.3) == {"link_gbps": 25.0, "copy_loop_gb_s_measured": 52.3, "copy_loop_gb_s": 25.0}
    assert link_facts(args, 12.0)["copy_loop_gb_s"] == 12.0  # a link slower than asked is not made faster
    unpaced = argparse.Namespace(link_gbps=None)
    assert link_facts(unpaced, 52.3)["copy_loop_gb_s"] == 52.3


def test_pacing_needs_a_positive_rate_and_a_cuda_device():
    with pytest.raises(ValueError, match="CUDA"):
        LinkPace(25, torch.device("cpu"))
    with pytest.raises(ValueError, match="positive"):
        LinkPace(-1, torch.device("cpu"))
