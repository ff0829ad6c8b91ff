"""bench.profile_decode refuses what it cannot run before it builds any weights."""

import pytest
import torch

from bench import profile_decode

TRACE = "resources/traces/qwen3-twin_code.npz"


@pytest.mark.parametrize("options, message", [
    (["--arms", "resident,fast"], "unknown arm fast"),
    (["--chunk-layers", "8,0"], "--chunk-layers takes positive layer counts"),
    (["--chunk-layers", "8,x"], "not a comma-separated list"),
])
def test_bad_options_are_refused_by_name(options, message, capsys):
    with pytest.raises(SystemExit):
        profile_decode.main(["--trace", TRACE, *options])
    assert message in capsys.readouterr().err


def test_no_gpu_is_refused_readably(capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit):
        profile_decode.main(["--trace", TRACE])
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_out_is_a_file_or_a_folder_checked_before_the_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # stops right after the option checks
    with pytest.raises(SystemExit):
        profile_decode.main(["--trace", TRACE, "--out", str(tmp_path / "missing" / "rows.json")])
    assert f"no folder {tmp_path / 'missing'} to write rows.json in" in capsys.readouterr().err
    for out in (tmp_path, tmp_path / "rows.json"):  # both pass the checks
        with pytest.raises(SystemExit):
            profile_decode.main(["--trace", TRACE, "--out", str(out)])
        assert "needs a CUDA GPU" in capsys.readouterr().err
    assert profile_decode.rows_path(tmp_path) == tmp_path / "profile_decode.json"
    assert profile_decode.rows_path(tmp_path / "rows.json") == tmp_path / "rows.json"
