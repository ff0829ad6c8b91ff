"""--speculative mtp from the CLI and the server: the JSON and the usage report count the draft layer's drafts;
a checkpoint whose config declares a draft layer its files do not hold is one line and status 2."""

from __future__ import annotations

import json

import openai

from engine.api import Engine, EngineOptions
from engine.cli import main
from engine.server import start_server
from tests.mtp_checkpoints import mtp_model_dir  # noqa: F401 - the fixture

RUN = ["--prompt", "def fib(n):", "--max-tokens", "12", "--device", "cpu", "--json"]


def test_json_reports_the_draft_layers_drafts(mtp_model_dir, capsys):  # noqa: F811
    folder = str(mtp_model_dir("qwen3_next", copying=True))
    capsys.readouterr()
    assert main(["run", folder, *RUN]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(["run", folder, *RUN, "--speculative", "mtp", "--draft-tokens", "4"]) == 0
    drafted = json.loads(capsys.readouterr().out)
    assert drafted["token_ids"] == plain["token_ids"]
    assert drafted["stats"]["spec_proposed"] > 0
    assert drafted["stats"]["spec_accepted"] >= 0.8 * drafted["stats"]["spec_proposed"]


def test_declared_but_missing_draft_layer_is_one_line_and_status_2(tiny_model_dir, capsys):
    folder = str(tiny_model_dir("deepseek_v3"))  # num_nextn_predict_layers 1, but transformers saved no such layer
    capsys.readouterr()
    assert main(["run", folder, *RUN, "--speculative", "mtp"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "hold no draft-layer tensors" in captured.err


def test_the_servers_usage_counts_the_draft_layers_drafts(mtp_model_dir):  # noqa: F811
    options = EngineOptions(model=str(mtp_model_dir("glm4_moe", copying=True)), device="cpu", speculative="mtp")
    with Engine(options) as engine:
        handle = start_server(engine, "127.0.0.1", 0, api_key="k")
        try:
            client = openai.OpenAI(base_url=handle.url, api_key="k", max_retries=0, timeout=60)
            raw = client.completions.with_raw_response.create(model="m", prompt="def fib(n):", max_tokens=16,
                                                              temperature=0)
            usage = raw.http_response.json()["usage"]
        finally:
            handle.stop()
    assert usage["spec_proposed"] > 0 and usage["spec_accepted"] >= 0.8 * usage["spec_proposed"]
