"""Take the screenshots of the MCP tool flow (docs/mcp.md) on the real app, under Xvfb:

    xvfb-run -s "-screen 0 1600x1000x24" python docs/make_tool_screenshots.py

The app runs the demo model's tools-capable copy (its chat template takes tools) and a real MCP server process
(tests/app/mcp_test_server.py: a calculator and a file reader). The demo model was not trained to call tools, so
its tokens are scripted here (the call, then the answer); the listing, the question, the call, its result in the
chat and the second request with the result are the real app's."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from PySide6.QtWidgets import QApplication

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import engine.runtime.llm_engine as llm_engine  # noqa: E402
from app.launch_options import LaunchOptions  # noqa: E402
from app.main_window import MainWindowWidget  # noqa: E402
from engine.text.tokenizer import Tokenizer  # noqa: E402
from tests.generation.tool_fixtures import TOOL_TEMPLATE  # noqa: E402

from make_screenshots import pause, wait_until  # noqa: E402  (docs/ is this script's folder)

CALL = '<tool_call>\n{"name": "calculate", "arguments": {"expression": "1234 * 5678"}}\n</tool_call>'
ANSWER = "1234 × 5678 = 7,006,652."


def tools_demo(folder: Path) -> Path:
    shutil.copytree(ROOT / "resources" / "demo_model", folder)
    (folder / "chat_template.jinja").write_text(TOOL_TEMPLATE)
    return folder


def script(folder: Path, *replies: str) -> None:
    tokenizer = Tokenizer.from_folder(folder)
    end = tokenizer.token_to_id("<|im_end|>")
    tokens = iter([t for reply in replies for t in [*tokenizer.encode(reply, add_special_tokens=False), end]])
    llm_engine.sample_tensors = lambda logits, params, generators, *contexts: (
        torch.tensor([next(tokens)]), torch.tensor([-1.0]))


def main() -> None:
    application = QApplication(sys.argv[:1])
    data_dir = Path(tempfile.mkdtemp(prefix="wisp-tool-screens-"))
    model = tools_demo(data_dir / "demo-tools")
    server = {"name": "calculator", "command": sys.executable,
              "args": [str(ROOT / "tests" / "app" / "mcp_test_server.py")], "approval": "ask"}
    (data_dir / "settings.json").write_text(json.dumps({"mcp_servers": [server]}))
    window = MainWindowWidget(LaunchOptions(data_dir=str(data_dir), model=str(model), device="cpu", theme="light"))
    window.resize(1480, 940)
    window.show()
    wait_until(lambda: window.loader.engine is not None and bool(window.tools.runner.tools))
    script(model, CALL, ANSWER)
    window.chat.composer.editor.setPlainText("What is 1234 * 5678? Use the calculator.")
    window.chat.composer.send_button.click()
    wait_until(lambda: window.tools.approval_box is not None and window.tools.approval_box.isVisible())
    pause(1.0)
    screen = window.screen().grabWindow(0, window.x(), window.y(), window.width(), window.height())
    screen.save(str(ROOT / "docs" / "screenshot-tool-approval.png"))  # the screen: the question is its own window
    box = window.tools.approval_box
    next(button for button in box.buttons() if button.text() == "Run").click()
    wait_until(lambda: not window.generation.is_busy)
    pause(1.0)
    window.grab().save(str(ROOT / "docs" / "screenshot-tool-call.png"))
    window.close()
    application.quit()
    shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
