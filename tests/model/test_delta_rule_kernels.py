"""Which kernels run the gated delta rule (engine.model.delta_rule_kernels): torch wherever fla cannot run, so the
CPU and a CUDA machine without fla-core take the torch forms."""

from __future__ import annotations

import logging
import sys

import pytest

import engine.model
from engine.model import delta_rule_kernels, gated_deltanet
from engine.model.delta_rule_kernels import kernels_for


@pytest.fixture(autouse=True)
def fresh_choice():
    delta_rule_kernels._kernels.cache_clear()
    yield
    delta_rule_kernels._kernels.cache_clear()


@pytest.fixture
def fla_missing(monkeypatch):
    """As on a machine without fla-core: importing it fails."""
    monkeypatch.setitem(sys.modules, "fla", None)
    monkeypatch.setitem(sys.modules, "engine.model.delta_rule_fla", None)
    monkeypatch.delattr(engine.model, "delta_rule_fla", raising=False)


def test_the_cpu_runs_the_torch_forms():
    kernels = kernels_for("cpu")
    assert kernels.name == "torch"
    assert kernels.chunked is gated_deltanet.chunked and kernels.recurrent_step is gated_deltanet.recurrent_step


def test_cuda_without_fla_falls_back_to_torch_and_says_why_once(fla_missing, caplog):
    with caplog.at_level(logging.WARNING, logger=delta_rule_kernels.__name__):
        assert kernels_for("cuda").name == "torch"
        assert kernels_for("cuda").name == "torch"
    warnings = [r for r in caplog.records if "fla does not import" in r.getMessage()]
    assert len(warnings) == 1
