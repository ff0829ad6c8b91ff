"""The bundled demo model: `wisp run` works out of the box and matches transformers token for token."""

import json

import torch

from engine.cli import main
from engine.loading.model_path import DEMO_MODEL


def test_wisp_run_on_the_demo_model_matches_transformers(capsys):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    capsys.readouterr()
    assert main(["run", "--prompt", "def fib(n):", "--max-tokens", "40", "--device", "cpu", "--json"]) == 0
    ours = json.loads(capsys.readouterr().out)
    ids = AutoTokenizer.from_pretrained(DEMO_MODEL)("def fib(n):")["input_ids"]
    model = AutoModelForCausalLM.from_pretrained(DEMO_MODEL, dtype=torch.float32).eval()
    with torch.inference_mode():
        out = model.generate(torch.tensor([ids]), max_new_tokens=40, do_sample=False)
    assert ours["token_ids"] == out[0, len(ids):].tolist()
    assert "\n" in ours["text"] and ours["stats"]["generated_tokens"] == len(ours["token_ids"])


def test_demo_model_answers_in_the_chat_format(capsys):
    capsys.readouterr()
    assert main(["run", "--chat", "--prompt", "What is the json module for?", "--max-tokens", "60",
                 "--device", "cpu", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["finish_reason"] == "stop" and result["text"].strip()
