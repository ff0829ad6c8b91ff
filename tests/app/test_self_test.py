"""`wisp-desktop --self-test` from the source tree: the check a build runs without a screen."""

import os
import subprocess
import sys
from pathlib import Path

from app.first_run import self_test

ROOT = Path(__file__).resolve().parents[2]


def test_self_test_loads_the_demo_model_generates_offscreen_and_exits_0(tmp_path):
    environment = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "WISP_DATA_DIR": str(tmp_path)}
    run = subprocess.run([sys.executable, "-m", "app.main", "--self-test"], cwd=ROOT, env=environment,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    line = run.stdout.strip()
    assert line.startswith("wisp-desktop self-test: ok: Qt offscreen, Wisp demo (qwen3_moe)")
    assert f"{self_test.NUM_TOKENS} tokens" in line and str(ROOT / "resources" / "demo_model") in line


def test_a_failing_self_test_prints_one_line_and_exits_1(monkeypatch, capsys):
    def broken():
        raise FileNotFoundError("resources/demo_model/config.json")

    monkeypatch.setattr(self_test, "generate_with_demo_model", broken)
    assert self_test.run_self_test() == 1
    err = capsys.readouterr().err
    assert err == "wisp-desktop self-test: FAILED: FileNotFoundError: resources/demo_model/config.json\n"
