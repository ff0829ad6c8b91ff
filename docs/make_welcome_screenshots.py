"""Take the README's screenshots of the first run (run under Xvfb):

    xvfb-run -s "-screen 0 1600x1000x24" python docs/make_welcome_screenshots.py

The app is started as a new user would (an empty data folder) on this machine: the welcome dialog over the main
window (light theme), and the dialog alone in the dark theme. Windows get frames when openbox is installed
(Debian package `openbox`); it is started for the run."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PySide6.QtWidgets import QApplication

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.app_paths import AppPaths  # noqa: E402
from app.first_run.welcome_dialog import WelcomeDialog  # noqa: E402
from app.launch_options import LaunchOptions  # noqa: E402
from app.main import APP_ID, open_main_window  # noqa: E402


from make_screenshots import wait_until  # noqa: E402  (this folder is on sys.path when run as a script)


def first_run(theme: str):
    """-> (main window, welcome dialog) of a new user's first start, once the model is loaded."""
    data_dir = tempfile.mkdtemp(prefix="wisp-first-run-")
    options = LaunchOptions(data_dir=data_dir, device="cpu", theme=theme)
    window = open_main_window(options, AppPaths.resolve(data_dir).create())
    window.resize(1480, 940)
    window.move(40, 30)
    dialog = window.findChild(WelcomeDialog)
    wait_until(lambda: dialog.facts is not None and window.loader.engine is not None)
    return window, dialog


def settle() -> None:
    end = time.monotonic() + 0.5
    wait_until(lambda: time.monotonic() > end)


def main() -> None:
    window_manager = subprocess.Popen(["openbox"]) if shutil.which("openbox") else None
    try:
        take_screenshots()
    finally:
        if window_manager is not None:
            window_manager.terminate()


def take_screenshots() -> None:
    application = QApplication([APP_ID])
    application.setApplicationName("Wisp")
    window, dialog = first_run("light")
    settle()
    frame = window.frameGeometry()
    screen = application.primaryScreen().grabWindow(0, frame.x(), frame.y(), frame.width(), frame.height())
    screen.save(str(ROOT / "docs" / "screenshot-welcome.png"))
    window.close()
    window, dialog = first_run("dark")
    settle()
    dialog.grab().save(str(ROOT / "docs" / "screenshot-welcome-dark.png"))
    window.close()


if __name__ == "__main__":
    main()
