"""One app per user and data folder: a second launch raises the first window and exits."""

import os
import subprocess
import sys
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMainWindow

from app.single_instance import SingleInstance, instance_key, raise_window

ROOT = Path(__file__).resolve().parents[2]
LAUNCH_TIMEOUT_S = 60


def claimed(key: str) -> SingleInstance:
    """The first instance (call it from a test that uses qtbot, so that the QApplication exists)."""
    instance = SingleInstance(key)
    assert instance.claim()
    return instance


def test_a_second_instance_asks_the_first_to_raise_its_window(qtbot, tmp_path):
    first = claimed(instance_key(tmp_path))
    try:
        second = SingleInstance(instance_key(tmp_path))
        with qtbot.waitSignal(first.activation_requested, timeout=5_000):
            assert not second.claim()
    finally:
        first.release()


def test_other_data_folders_get_their_own_instance(qtbot, tmp_path):
    first = claimed(instance_key(tmp_path / "a"))
    other = SingleInstance(instance_key(tmp_path / "b"))
    try:
        assert other.claim()
    finally:
        other.release()
        first.release()


def test_a_second_launch_of_wisp_desktop_raises_the_first_and_exits(qtbot, tmp_path):
    data_dir = tmp_path / "wisp-data"
    data_dir.mkdir()
    first = claimed(instance_key(data_dir))
    environment = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    try:
        with qtbot.waitSignal(first.activation_requested, timeout=LAUNCH_TIMEOUT_S * 1000):
            launch = subprocess.Popen([sys.executable, "-m", "app.main", "--data-dir", str(data_dir)], cwd=ROOT,
                                      env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = launch.communicate(timeout=LAUNCH_TIMEOUT_S)
    finally:
        first.release()
    assert launch.returncode == 0, err
    assert "already running" in out
    assert not (data_dir / "first_run.json").exists()  # it left before opening anything


def test_an_instance_that_crashed_does_not_block_the_next_launch(qtbot, tmp_path):
    key = instance_key(tmp_path)
    crash = ("import os; from PySide6.QtCore import QCoreApplication; application = QCoreApplication([]); "
             "from app.single_instance import SingleInstance; "
             f"assert SingleInstance({key!r}).claim(); os._exit(3)")
    assert subprocess.run([sys.executable, "-c", crash], cwd=ROOT, timeout=LAUNCH_TIMEOUT_S).returncode == 3
    first = claimed(key)
    try:
        with qtbot.waitSignal(first.activation_requested, timeout=5_000):
            assert not SingleInstance(key).claim()
    finally:
        first.release()


def test_raise_window_restores_a_minimised_window(qtbot):
    window = QMainWindow()
    qtbot.addWidget(window)
    window.showMinimized()
    qtbot.waitUntil(lambda: window.isMinimized())
    raise_window(window)
    qtbot.waitUntil(lambda: not window.isMinimized() and window.isVisible())
    assert not window.windowState() & Qt.WindowState.WindowMinimized


def test_a_second_launch_with_a_model_has_the_first_load_it(qtbot, tmp_path, tiny_model_dir):
    data_dir = tmp_path / "wisp-data"
    data_dir.mkdir()
    model = tiny_model_dir("qwen3_moe")
    first = claimed(instance_key(data_dir))
    environment = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    try:
        with qtbot.waitSignal(first.model_requested, timeout=LAUNCH_TIMEOUT_S * 1000) as requested:
            launch = subprocess.Popen([sys.executable, "-m", "app.main", str(model), "--data-dir", str(data_dir)],
                                      cwd=ROOT, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True)
        launch.communicate(timeout=LAUNCH_TIMEOUT_S)
    finally:
        first.release()
    assert launch.returncode == 0 and requested.args == [str(model.resolve())]
