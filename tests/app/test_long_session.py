"""A long session: the app outlives every reference to None its Qt binding may drop, and a five-minute soak of
streaming and idling ends without a crash and with an empty crash log."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

PAINT_MANY_TIMES = """
import os, sys
os.environ["QT_QPA_PLATFORM"] = "offscreen"
from PySide6.QtWidgets import QApplication
application = QApplication([])
budget = sys.getrefcount(None)  # what a binding that drops a reference per void call can spend
from app.launch_options import LaunchOptions
from app.main_window import MainWindowWidget
window = MainWindowWidget(LaunchOptions(data_dir=sys.argv[1], is_autoload=False, theme="light"))
charts = (window.memory_panel.hit_rate_chart, window.memory_panel.decode_chart, window.memory_panel.h2d_chart)
for i in range(budget // 4):  # each paint makes more than four void calls
    chart = charts[i % 3]
    chart.add_value(i % 7 / 7)
    chart.grab()
print("alive", flush=True)
os._exit(0)
"""


def test_painting_the_live_charts_longer_than_none_lasts_does_not_abort(tmp_path):
    run = subprocess.run([sys.executable, "-c", PAINT_MANY_TIMES, str(tmp_path)], cwd=ROOT, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "none_dealloc" not in run.stderr
    assert run.returncode == 0 and "alive" in run.stdout, run.stderr[-2000:]


SOAK_S = float(os.environ.get("WISP_SOAK_S", "300"))


@pytest.mark.slow
def test_five_minutes_of_streaming_and_idling_end_without_a_crash(tmp_path, tiny_model_dir):
    data_dir = tmp_path / "wisp-data"
    run = subprocess.run([sys.executable, "-m", "tests.app.soak_session", str(data_dir),
                          str(tiny_model_dir("qwen3_moe")), str(SOAK_S)], cwd=ROOT, capture_output=True, text=True,
                         timeout=SOAK_S + 300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0 and "alive after" in run.stdout, run.stderr[-3000:]
    print(run.stdout)  # what it did, and on which PySide6 (pytest -rA shows it)
    replies = int(run.stdout.split(": ")[1].split()[0])
    assert replies >= SOAK_S // 60, run.stdout  # it streamed throughout, not only at the start
    crash_log = data_dir / "logs" / "crash.log"
    assert not crash_log.exists() or "Fatal" not in crash_log.read_text()
