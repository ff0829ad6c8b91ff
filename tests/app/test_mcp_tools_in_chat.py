"""MCP tools end to end in the app, offscreen: a real stdio MCP server process (tests/app/mcp_test_server.py) is
configured in the settings, its tools are offered to the demo model's tools-capable copy (its chat template takes
tools and asks for <tool_call> blocks), the model's call is shown in the chat, asked about, run, and its result
goes back to the model, which then answers. The model's tokens are scripted (the demo model was not trained to
call tools); everything else is the real app, engine and server."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("mcp")

import engine.runtime.llm_engine as llm_engine  # noqa: E402
from app.resource_paths import RESOURCES  # noqa: E402
from engine.text.tokenizer import Tokenizer  # noqa: E402
from tests.app.driving import messages, type_and_send, use_greedy_sampling, wait_until_idle  # noqa: E402
from tests.generation.tool_fixtures import TOOL_TEMPLATE  # noqa: E402

SERVER = {"name": "tools", "command": sys.executable, "args": [str(Path(__file__).with_name("mcp_test_server.py"))],
          "approval": "ask"}
CALL = '<tool_call>\n{"name": "calculate", "arguments": {"expression": "6 * 7"}}\n</tool_call>'
ANSWER = "It is 42."
pytestmark = pytest.mark.slow  # the demo model reads the tool schemas: a prompt of ~300 tokens per request
LIST_TIMEOUT_MS = 60_000
REPLY_MS = 180_000  # a shared CI machine under load runs the demo model slowly


@pytest.fixture(scope="module")
def tools_demo(tmp_path_factory) -> Path:
    """The demo model with a chat template that takes tools (Qwen3's form)."""
    folder = tmp_path_factory.mktemp("tools-demo") / "demo-tools"
    shutil.copytree(RESOURCES / "demo_model", folder)
    (folder / "chat_template.jinja").write_text(TOOL_TEMPLATE)
    return folder


def script_replies(monkeypatch, folder: Path, *replies: str) -> None:
    """The engine samples these replies, one after the other, each ended by <|im_end|>."""
    tokenizer = Tokenizer.from_folder(folder)
    end = tokenizer.token_to_id("<|im_end|>")
    tokens = iter([t for reply in replies for t in [*tokenizer.encode(reply, add_special_tokens=False), end]])
    monkeypatch.setattr(llm_engine, "sample_tensors", lambda logits, params, generators, *contexts: (
        torch.tensor([next(tokens)]), torch.tensor([-1.0])))


def configure(data_dir: Path, **server) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "settings.json").write_text(json.dumps({"mcp_servers": [{**SERVER, **server}]}))


def record_requests(window) -> list:
    engine, sent = window.loader.engine, []
    submit = engine.submit
    engine.submit = lambda request, callback=None: (sent.append(request), submit(request, callback))[1]
    return sent


def approval_box(window):
    box = window.tools.approval_box
    return box if box is not None and box.isVisible() else None


def click(box, text: str) -> None:
    next(button for button in box.buttons() if button.text() == text).click()


def test_a_tool_call_is_asked_run_shown_and_answered(qtbot, start_app, data_dir, tools_demo, monkeypatch):
    configure(data_dir)
    window = start_app(model=str(tools_demo))
    qtbot.waitUntil(lambda: bool(window.tools.runner.tools), timeout=LIST_TIMEOUT_MS)
    script_replies(monkeypatch, tools_demo, CALL, ANSWER)
    assert window.tools.label.text() == "Tools: 2"
    sent = record_requests(window)
    type_and_send(qtbot, window, "What is 6 * 7?")
    qtbot.waitUntil(lambda: approval_box(window) is not None, timeout=REPLY_MS)
    assert "calculate" in approval_box(window).text() and "6 * 7" in approval_box(window).informativeText()
    click(approval_box(window), "Run")
    wait_until_idle(qtbot, window, timeout=REPLY_MS)
    user, call, result, answer = messages(window)
    assert call.info["tool_calls"][0]["name"] == "calculate" and call.content == ""
    assert (result.role, result.content, result.info["is_error"]) == ("tool", "42", False)
    assert result.info["seconds"] > 0 and answer.content == ANSWER
    assert {t["function"]["name"] for t in sent[0].tools} >= {"calculate", "read_file"}
    replayed = sent[1].messages
    assert replayed[-2]["tool_calls"][0]["function"] == {"name": "calculate", "arguments": {"expression": "6 * 7"}}
    assert replayed[-1] == {"role": "tool", "content": "42", "tool_call_id": call.info["tool_calls"][0]["id"]}
    shown = window.chat.view.message_widgets[2]
    assert shown.role_label.text() == "Tool" and "done" in shown.stats_label.text()
    assert "calculate" in shown.body.toPlainText() and "42" in shown.body.toPlainText()


def test_a_denied_call_is_not_run_and_the_model_is_told(qtbot, start_app, data_dir, tools_demo, monkeypatch,
                                                         tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("do not read")
    configure(data_dir)
    window = start_app(model=str(tools_demo))
    qtbot.waitUntil(lambda: bool(window.tools.runner.tools), timeout=LIST_TIMEOUT_MS)
    script_replies(monkeypatch, tools_demo,
                   CALL.replace('"calculate"', '"read_file"').replace('"expression": "6 * 7"',
                                                                       f'"path": "{secret}"'), "I may not read it.")
    type_and_send(qtbot, window, "Read my secret")
    qtbot.waitUntil(lambda: approval_box(window) is not None, timeout=REPLY_MS)
    click(approval_box(window), "Don't run")
    wait_until_idle(qtbot, window, timeout=REPLY_MS)
    result = messages(window)[2]
    assert result.info["is_error"] and "did not allow" in result.content and "do not read" not in result.content
    assert messages(window)[-1].content == "I may not read it."


def test_always_allow_runs_without_asking_and_is_saved(qtbot, start_app, data_dir, tools_demo, monkeypatch):
    configure(data_dir)
    window = start_app(model=str(tools_demo))
    qtbot.waitUntil(lambda: bool(window.tools.runner.tools), timeout=LIST_TIMEOUT_MS)
    script_replies(monkeypatch, tools_demo, CALL, "First.", CALL, "Second.")
    type_and_send(qtbot, window, "What is 6 * 7?")
    qtbot.waitUntil(lambda: approval_box(window) is not None, timeout=REPLY_MS)
    click(approval_box(window), "Always allow this server")
    wait_until_idle(qtbot, window, timeout=REPLY_MS)
    window.tools.approval_box = None
    type_and_send(qtbot, window, "And again?")
    wait_until_idle(qtbot, window, timeout=REPLY_MS)
    assert window.tools.approval_box is None  # not asked the second time
    assert [m.content for m in messages(window) if m.role == "tool"] == ["42", "42"]
    saved = json.loads((data_dir / "settings.json").read_text())["mcp_servers"]
    assert saved[0]["approval"] == "allow"


def test_a_model_whose_template_takes_no_tools_is_offered_none_and_the_app_says_so(qtbot, start_app, data_dir):
    configure(data_dir, approval="allow")
    window = start_app(model="demo")
    qtbot.waitUntil(lambda: bool(window.tools.runner.tools), timeout=LIST_TIMEOUT_MS)
    assert window.tools.label.text() == "Tools off: this model's chat template cannot take tools"
    use_greedy_sampling(window, max_tokens=4)
    sent = record_requests(window)
    type_and_send(qtbot, window, "Hello")
    wait_until_idle(qtbot, window, timeout=REPLY_MS)
    assert sent[0].tools is None and [m.role for m in messages(window)] == ["user", "assistant"]
