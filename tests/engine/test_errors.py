"""Every user error exits with status 2 and one readable line naming the file, field or number."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from engine.cli import main


@pytest.fixture
def broken(tiny_model_dir, tmp_path):
    """A fresh copy of the tiny qwen3_moe folder to break."""
    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir("qwen3_moe"), folder)
    return folder


def wisp_run(capsys, folder, *extra) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["run", str(folder), "--prompt", "def fib(n):", "--max-tokens", "2", "--device", "cpu", *extra])
    err = capsys.readouterr().err.strip()
    return code, err


def edit_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    for key, value in changes.items():
        if value is None:
            del config[key]
    (folder / "config.json").write_text(json.dumps(config))


def assert_user_error(code, err, *fragments):
    assert code == 2
    assert err.startswith("wisp: error:") and len(err.splitlines()) == 1
    for fragment in fragments:
        assert fragment in err


def test_missing_config(capsys, broken):
    (broken / "config.json").unlink()
    assert_user_error(*wisp_run(capsys, broken), "config.json", "missing")


def test_invalid_config_json(capsys, broken):
    (broken / "config.json").write_text("{not json")
    assert_user_error(*wisp_run(capsys, broken), "config.json", "not valid JSON")


def test_config_missing_field(capsys, broken):
    edit_config(broken, hidden_size=None)
    assert_user_error(*wisp_run(capsys, broken), "hidden_size")


def test_unsupported_model_type(capsys, broken):
    edit_config(broken, model_type="dbrx")
    assert_user_error(*wisp_run(capsys, broken), "dbrx", "qwen3_moe", "mixtral")


def test_dense_model_is_refused(capsys, broken):
    edit_config(broken, model_type="llama")
    assert_user_error(*wisp_run(capsys, broken), "dense")


def test_missing_shard(capsys, broken):
    weights = broken / "model.safetensors"
    weights.rename(broken / "model-00001-of-00002.safetensors")
    index = {"metadata": {}, "weight_map": {"lm_head.weight": "model-00002-of-00002.safetensors",
                                            "model.norm.weight": "model-00001-of-00002.safetensors"}}
    (broken / "model.safetensors.index.json").write_text(json.dumps(index))
    assert_user_error(*wisp_run(capsys, broken), "model-00002-of-00002.safetensors", "missing")


def test_truncated_safetensors(capsys, broken):
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    assert_user_error(*wisp_run(capsys, broken), "model.safetensors", "truncated or corrupt")


def test_tensor_shape_mismatch(capsys, broken):
    edit_config(broken, moe_intermediate_size=40)
    assert_user_error(*wisp_run(capsys, broken), "shape", "experts")


def test_missing_tokenizer(capsys, broken):
    (broken / "tokenizer.json").unlink()
    assert_user_error(*wisp_run(capsys, broken), "tokenizer.json")


def test_prompt_longer_than_context(capsys, broken):
    code, err = wisp_run(capsys, broken, "--max-model-len", "4")
    assert_user_error(code, err, "prompt has", "context holds 4")


def test_unknown_hf_id_is_not_downloaded(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    capsys.readouterr()
    code = main(["run", "nobody/no-such-model", "--prompt", "x"])
    assert_user_error(code, capsys.readouterr().err.strip(), "nobody/no-such-model", "never downloads")


def test_console_script_exit_status(broken):
    (broken / "config.json").unlink()
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "run", str(broken), "--prompt", "x"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "config.json" in proc.stderr and "Traceback" not in proc.stderr
