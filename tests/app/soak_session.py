"""A long session for tests/app/test_long_session.py, run in its own process (a native crash must not take the
test runner with it): the app streams replies and sits idle by turns for DURATION seconds, painting its live
charts all along, then prints what it did and exits 0.

    python -m tests.app.soak_session DATA_DIR MODEL_DIR DURATION_S"""

import os
import sys
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEventLoop  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

IDLE_S = 20
GiB = 1024**3


def wait_until(application, condition, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the app did not get there in time")
        application.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 50)


def idle(application, window, seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        application.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 50)
        window.memory_panel.grab()  # paint the panel's charts even where the platform shows no window


def main(data_dir: str, model: str, duration_s: float) -> int:
    application = QApplication.instance() or QApplication(["wisp-soak"])
    from app.launch_options import LaunchOptions
    from app.main_window import MainWindowWidget

    window = MainWindowWidget(LaunchOptions(data_dir=data_dir, model=model, device="cpu", budget_bytes=GiB,
                                            theme="light"))
    window.show()
    wait_until(application, lambda: window.loader.engine is not None, 120)
    window.chat.settings_bar.set_sampling(0.8, 0.95, 200)
    start, replies = time.monotonic(), 0
    while time.monotonic() - start < duration_s:
        window.chat.composer.editor.setPlainText(f"tell me a story, part {replies}")
        window.chat.composer.submit()
        wait_until(application, lambda: window.generation.is_busy, 30)
        wait_until(application, lambda: not window.generation.is_busy, 120)
        replies += 1
        idle(application, window, min(IDLE_S, max(0.0, duration_s - (time.monotonic() - start))))
    import PySide6

    print(f"alive after {time.monotonic() - start:.0f} s: {replies} replies, PySide6 {PySide6.__version__}, "
          f"{len(window.memory_panel.decode_chart.values)} chart samples", flush=True)
    window.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], float(sys.argv[3])))
