"""A reasoning model's chat reply through Wisp's whole engine and `wisp run --json`: a tiny checkpoint with a
harmony tokenizer, whose sampler is replaced by a script of token ids (a random tiny model would not write
harmony), so the detokenizer, the parser, the events and the end of generation are the engine's own."""

from __future__ import annotations

import json

import pytest
import torch

import engine.runtime.llm_engine as llm_engine
from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams, TokenEvent
from engine.cli import main
from engine.text.tokenizer import Tokenizer
from tests.generation.reasoning_fixtures import write_reasoning_model

REPLY = ("<|channel|>analysis<|message|>Greet back.<|end|><|start|>assistant<|channel|>final<|message|>Hi you!"
         "<|call|>")
TAIL = "never shown"


@pytest.fixture(scope="module")
def harmony_model(tmp_path_factory):
    return write_reasoning_model(tmp_path_factory.mktemp("harmony_model"), "harmony")


@pytest.fixture
def scripted_sampler(harmony_model, monkeypatch):
    """Replace sampling with REPLY's token ids followed by TAIL's."""
    tokenizer = Tokenizer.from_folder(harmony_model)
    script = iter(tokenizer.encode(REPLY + TAIL, add_special_tokens=False))

    def sample(logits, params, generators, contexts=None):
        return torch.tensor([next(script) for _ in params]), torch.tensor([-1.0] * len(params))

    monkeypatch.setattr(llm_engine, "sample_tensors", sample)
    return tokenizer


def test_the_engine_streams_reasoning_apart_and_stops_at_the_call(harmony_model, scripted_sampler):
    request = GenerateRequest(messages=({"role": "user", "content": "Hi"},), sampling=SamplingParams(max_tokens=200))
    with Engine(EngineOptions(model=str(harmony_model), device="cpu")) as engine:
        handle = engine.submit(request)
        tokens = [event for event in handle if isinstance(event, TokenEvent)]
    finish = handle.finish
    assert (finish.reason, finish.text, finish.reasoning) == ("stop", "Hi you!", "Greet back.")
    assert "".join(t.text for t in tokens) == "Hi you!" and "".join(t.reasoning for t in tokens) == "Greet back."
    assert len(finish.token_ids) == len(scripted_sampler.encode(REPLY, add_special_tokens=False))


def test_wisp_run_json_has_a_reasoning_field(harmony_model, scripted_sampler, capsys):
    status = main(["run", str(harmony_model), "--prompt", "Hi", "--chat", "--json", "--device", "cpu",
                   "--max-tokens", "200"])
    result = json.loads(capsys.readouterr().out)
    assert status == 0
    assert (result["text"], result["reasoning"], result["finish_reason"]) == ("Hi you!", "Greet back.", "stop")
