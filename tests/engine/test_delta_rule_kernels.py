"""Which kernels run the gated delta rule (engine.model.delta_rule_kernels): torch wherever fla cannot run, so the
CPU and a CUDA machine without fla-core take the torch forms whatever WISP_LINEAR_ATTENTION says."""

from __future__ import annotations

import logging
import sys

import pytest

import engine.model
from engine.model import delta_rule_kernels, gated_deltanet
from engine.model.delta_rule_kernels import ENV_VAR, kernels_for


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


def test_the_default_is_one_of_the_choices_and_unset_means_the_default(monkeypatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    assert delta_rule_kernels.DEFAULT_KERNELS in delta_rule_kernels.CHOICES
    assert delta_rule_kernels.requested() == delta_rule_kernels.DEFAULT_KERNELS


@pytest.mark.parametrize("choice", ["fla", "torch", "FLA", ""])
def test_the_cpu_runs_the_torch_forms_whatever_is_asked(monkeypatch, choice):
    monkeypatch.setenv(ENV_VAR, choice)
    kernels = kernels_for("cpu")
    assert kernels.name == "torch"
    assert kernels.chunked is gated_deltanet.chunked and kernels.recurrent_step is gated_deltanet.recurrent_step


def test_cuda_without_fla_falls_back_to_torch_and_says_why_once(monkeypatch, fla_missing, caplog):
    monkeypatch.setenv(ENV_VAR, "fla")
    with caplog.at_level(logging.WARNING, logger=delta_rule_kernels.__name__):
        assert kernels_for("cuda").name == "torch"
        assert kernels_for("cuda").name == "torch"
    warnings = [r for r in caplog.records if "fla does not import" in r.getMessage()]
    assert len(warnings) == 1


def test_torch_asked_on_cuda_gets_torch_without_importing_fla(monkeypatch, fla_missing, caplog):
    monkeypatch.setenv(ENV_VAR, "torch")
    with caplog.at_level(logging.WARNING, logger=delta_rule_kernels.__name__):
        assert kernels_for("cuda") is delta_rule_kernels.TORCH
    assert not caplog.records


def test_an_unknown_choice_is_refused_with_the_choices(monkeypatch):
    monkeypatch.setenv(ENV_VAR, "flash")
    with pytest.raises(ValueError, match="fla, torch"):
        kernels_for("cuda")


def test_a_hybrid_model_on_the_cpu_with_fla_asked_gives_the_torch_tokens(monkeypatch, tiny_model_dir):
    from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams

    request = GenerateRequest(prompt="def fib(n):", sampling=SamplingParams(max_tokens=8, ignore_eos=True))
    folder = str(tiny_model_dir("qwen3_next"))
    results = {}
    for choice in ("torch", "fla"):
        monkeypatch.setenv(ENV_VAR, choice)
        with Engine(EngineOptions(model=folder, device="cpu")) as engine:
            result = engine.generate(request)
        results[choice] = (result.token_ids, result.logprobs)
    assert results["fla"] == results["torch"]
