"""`wisp run`'s sampling flags beyond temperature and top-p, and `--json-schema FILE`: the reply is JSON the schema
accepts; bad values are one line and status 2 before the model loads."""

import json

import pytest

from engine.cli import main

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9},
                                           "ok": {"type": "boolean"}}, "required": ["n", "ok"]}


def run_json(capsys, *args) -> dict:
    capsys.readouterr()
    assert main(["run", "--device", "cpu", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_schema_file_gives_json_the_schema_accepts(capsys, tmp_path):
    path = tmp_path / "schema.json"
    path.write_text(json.dumps(SCHEMA))
    result = run_json(capsys, "--prompt", "The answer as JSON:", "--json-schema", str(path), "--max-tokens", "40",
                      "--temperature", "0.8", "--seed", "3")
    value = json.loads(result["text"])
    assert set(value) == {"n", "ok"} and 0 <= value["n"] <= 9 and result["finish_reason"] == "stop"


def test_penalties_and_bias_change_the_greedy_reply(capsys):
    plain = run_json(capsys, "--prompt", "def fib(n):", "--max-tokens", "12")
    first = plain["token_ids"][0]
    biased = run_json(capsys, "--prompt", "def fib(n):", "--max-tokens", "12", "--logit-bias", f"{first}=-100",
                      "--repetition-penalty", "1.5", "--min-p", "0.05", "--presence-penalty", "0.5",
                      "--frequency-penalty", "0.5")
    assert biased["token_ids"][0] != first


@pytest.mark.parametrize("argv, word", [
    (["--logit-bias", "12"], "--logit-bias"),
    (["--logit-bias", "12=500"], "logit_bias"),
    (["--presence-penalty", "3"], "presence_penalty"),
    (["--repetition-penalty", "0"], "repetition_penalty"),
    (["--min-p", "2"], "min_p"),
    (["--json-schema", "/no/such/schema.json"], "/no/such/schema.json"),
])
def test_bad_sampling_flags_are_one_line_and_status_2(argv, word, capsys):
    assert main(["run", "--prompt", "hi", *argv]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and word in lines[0]
