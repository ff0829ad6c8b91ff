"""Take the README's screenshots of the real app on the bundled demo model (run under Xvfb):

    xvfb-run -s "-screen 0 1600x1000x24" python docs/make_screenshots.py

Chat mode (light theme) and code mode (dark theme, with a code continuation), each with the live memory panel,
after moving the budget so that the demo model pages its experts (8 of 16 slots per layer); the memory panel alone
while a reply streams (rates over the last seconds, the controller's status and decisions) and after Stop (the
rates back at idle); the budget slider with its marks; the model picker offering to load the demo at its minimum
when the budget is set below it."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from pathlib import Path

from PySide6.QtCore import QEventLoop, QTimer
from PySide6.QtWidgets import QApplication

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.launch_options import DEMO, LaunchOptions  # noqa: E402
from app.main_window import MainWindowWidget  # noqa: E402

MiB = 1024**2
KV_FLOOR = 512 * MiB
NUM_SLOTS = 8


def wait_until(condition, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the app did not get there in time")
        loop = QEventLoop()
        QTimer.singleShot(20, loop.quit)
        loop.exec()


def pause(seconds: float) -> None:
    end = time.monotonic() + seconds
    wait_until(lambda: time.monotonic() > end)


def paging_budget(plan) -> int:
    slots = NUM_SLOTS * plan.num_moe_layers * plan.expert_bytes
    return plan.dense_bytes + plan.workspace_bytes + KV_FLOOR + slots + MiB


def ask(window, text: str, continue_code: bool = False, wait: bool = True) -> None:
    window.chat.composer.editor.setPlainText(text)
    (window.chat.composer.continue_button if continue_code else window.chat.composer.send_button).click()
    wait_until(lambda: window.generation.is_busy)
    if wait:
        wait_until(lambda: not window.generation.is_busy)


def save_small(widget, name: str) -> None:
    """The widget as a PNG under docs/ (8-bit palette: these are flat UI colours, and the file stays small)."""
    from PySide6.QtGui import QImage

    image = widget.grab().toImage().convertToFormat(QImage.Format.Format_Indexed8)
    image.save(str(ROOT / "docs" / name), "PNG", 9)


def panel_while_streaming(window) -> None:
    """The memory panel two seconds into a long reply: the rates are those of the last seconds."""
    panel = window.memory_panel
    window.chat.settings_bar.set_sampling(0.9, 0.95, 1500)
    for attempt in range(20):  # the demo model may end a reply early: ask again until one is mid-stream
        ask(window, f"Write a long Python module with many small helper functions ({attempt}).", wait=False)
        pause(1.5)
        if window.generation.is_busy and (panel.decode_chart.values or [0])[-1]:
            break
        wait_until(lambda: not window.generation.is_busy)
    save_small(panel, "screenshot-memory-panel.png")
    window.generation.stop()
    wait_until(lambda: not window.generation.is_busy)
    wait_until(lambda: panel.decode_chart.values[-1] == 0.0)  # Stop marks the engine idle
    pause(1.0)
    save_small(panel, "screenshot-panel-after-stop.png")


def picker_minimum_offer(window) -> None:
    """The picker at a budget below the demo's minimum: the demo row says so and the picker offers the minimum."""
    slider = window.memory_panel.budget_slider
    slider.set_budget(window.loader.engine.stats().plan.dense_bytes + 300 * MiB)  # shown, not applied
    picker = window.open_model_picker()
    picker.resize(960, 300)
    wait_until(lambda: picker.model.rowCount() > 0)
    picker.select_row(next(i for i, row in enumerate(picker.model.rows) if row.entry.source == "demo"))
    pause(0.5)
    save_small(picker, "screenshot-picker-minimum.png")
    picker.reject()
    slider.set_budget(window.loader.engine.stats().plan.budget_bytes)


def main() -> None:
    application = QApplication(sys.argv[:1])
    data_dir = tempfile.mkdtemp(prefix="wisp-screens-")
    window = MainWindowWidget(LaunchOptions(data_dir=data_dir, model=DEMO, device="cpu", theme="light"))
    window.resize(1480, 940)
    window.show()
    wait_until(lambda: window.loader.engine is not None)
    window.memory_panel.budget_slider.request(paging_budget(window.loader.engine.info.plan))
    wait_until(lambda: not window.budget.is_pending)
    settings = window.chat.settings_bar
    settings.set_sampling(0.7, 0.95, 160)
    ask(window, "Write a Python function that checks whether a number is prime.")
    ask(window, "Now write a short docstring for it.")
    pause(1.5)
    window.grab().save(str(ROOT / "docs" / "screenshot-chat.png"))
    panel_while_streaming(window)
    save_small(window.memory_panel.budget_slider, "screenshot-budget-slider.png")
    picker_minimum_offer(window)

    window.set_theme("dark")
    window.new_chat()
    window.chat.set_mode("code")
    project = Path(data_dir) / "project"  # the attachments' paths show: a neutral folder, not the checkout's
    project.mkdir()
    for name in ("token_counter.py", "attachments.py"):
        shutil.copy(ROOT / "app" / "chat" / name, project / name)
    window.chat.code_context.attach([project / "token_counter.py"])
    wait_until(lambda: window.chat.code_context.token_count > 0)
    settings.set_sampling(0.2, 0.95, 120)
    ask(window, "import os\n\n\ndef list_python_files(folder):\n    \"\"\"Return the .py files under folder.\"\"\"\n",
        continue_code=True)
    window.chat.code_context.attach([project / "attachments.py"])
    wait_until(lambda: window.chat.code_context.token_count > 0)
    window.chat.composer.editor.setPlainText("How could read_text_file skip binary files faster?")
    pause(1.5)
    window.grab().save(str(ROOT / "docs" / "screenshot-code.png"))
    window.close()
    application.quit()


if __name__ == "__main__":
    main()
