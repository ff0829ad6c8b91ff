"""--speculative on the CLI: the JSON counts drafts; mtp where it cannot run is one line and status 2."""

from __future__ import annotations

import json

from engine.cli import main
from engine.runtime.draft_layers import count_draft_layers

RUN = ["--prompt", "a b c a b c a b", "--max-tokens", "12", "--device", "cpu"]


def test_json_reports_drafts_and_the_same_tokens(tiny_model_dir, capsys):
    folder = str(tiny_model_dir("qwen3_moe"))
    capsys.readouterr()
    assert main(["run", folder, *RUN, "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(["run", folder, *RUN, "--json", "--speculative", "ngram", "--draft-tokens", "3"]) == 0
    drafted = json.loads(capsys.readouterr().out)
    assert drafted["token_ids"] == plain["token_ids"]
    assert plain["stats"]["spec_proposed"] == 0
    assert 0 < drafted["stats"]["spec_proposed"]
    assert 0 <= drafted["stats"]["spec_accepted"] <= drafted["stats"]["spec_proposed"]


def test_mtp_without_draft_layers_is_one_line_and_status_2(tiny_model_dir, capsys):
    folder = str(tiny_model_dir("qwen3_moe"))
    capsys.readouterr()
    assert main(["run", folder, *RUN, "--speculative", "mtp"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "no draft (MTP) layers" in captured.err


def test_bad_draft_tokens_is_a_usage_error(capsys):
    assert main(["run", *RUN, "--speculative", "ngram", "--draft-tokens", "0"]) == 2
    assert "--draft-tokens" in capsys.readouterr().err


def test_draft_layers_of_published_configs():
    assert count_draft_layers({"num_nextn_predict_layers": 1}) == 1  # DeepSeek-V3, GLM-4.5
    assert count_draft_layers({"text_config": {"mtp_num_hidden_layers": 1}}) == 1  # Qwen3.5 (multimodal)
    assert count_draft_layers({"num_hidden_layers": 4}) == 0


def test_engine_stats_count_drafts_for_the_memory_panel(tiny_model_dir):
    from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
    from tests.server.conftest import wait_until

    with Engine(EngineOptions(model=str(tiny_model_dir("qwen3_moe")), device="cpu")) as engine:
        assert engine.stats().spec_proposed == 0
        finish = engine.generate(GenerateRequest(prompt="a b c a b c a b", speculative="ngram",
                                                 sampling=SamplingParams(max_tokens=12)))
        assert wait_until(lambda: engine.stats().spec_proposed == finish.stats.spec_proposed)  # published on drain
        stats = engine.stats()
    assert stats.spec_proposed > 0
    assert stats.spec_accepted == finish.stats.spec_accepted
