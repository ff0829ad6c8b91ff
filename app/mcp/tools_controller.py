"""MCP tools in the main window (GUI thread): the ToolRunner for the configured servers, the question asked
before a call (run once, always for this server, or not), the status-bar line that says which tools the loaded
model is offered (or why none), and the MCP servers dialog."""

from __future__ import annotations

import json
from typing import Callable

from PySide6.QtCore import QObject, Signal, Slot
from PySide6.QtWidgets import QLabel, QMessageBox, QWidget

from app.mcp.mcp_servers_dialog import McpServersDialog
from app.mcp.server_config import McpServerConfig
from app.mcp.tool_hub import McpHub, OfferedTool
from app.mcp.tool_runner import ToolRunner

ANSWERS = {"run": "Run", "always": "Always allow this server", "deny": "Don't run"}


def tools_status(runner: ToolRunner, model_takes_tools: bool | None) -> str:
    """The status-bar line: no servers, listing, N tools offered, or why the model is offered none."""
    if not any(server.is_enabled for server in runner.servers):
        return ""
    if model_takes_tools is False:
        return "Tools off: this model's chat template cannot take tools"
    if runner.is_listing:
        return "Tools: listing…"
    problems = f" ({len(runner.problems)} server{'s' * (len(runner.problems) > 1)} failed)" if runner.problems else ""
    return f"Tools: {len(runner.tools)}{problems}"


class ToolsController(QObject):
    servers_saved = Signal(tuple)  # the servers as they should be saved in the settings

    def __init__(self, servers: tuple[McpServerConfig, ...], window: QWidget, hub: McpHub | None = None):
        super().__init__(window)
        self._window = window
        self.runner = ToolRunner(servers, self.ask, self, hub)
        self.label = QLabel("", window, accessibleName="Tools")
        self.dialog: McpServersDialog | None = None
        self.approval_box: QMessageBox | None = None
        self._model_takes_tools: bool | None = None
        self.runner.tools_changed.connect(self._show_status)
        self.runner.servers_changed.connect(self.servers_saved)
        self.runner.refresh()

    def set_model_info(self, info) -> None:
        """The loaded model (engine.api.ModelInfo) or None: whether its template takes tools."""
        self._model_takes_tools = None if info is None else bool(info.tool_calls)
        self._show_status()

    def open_dialog(self) -> McpServersDialog:
        self.dialog = McpServersDialog(self.runner.servers, self._window)
        self.dialog.servers_changed.connect(self._on_dialog_servers_changed)
        self.dialog.show_tools(self._tools_text())
        self.dialog.open()
        return self.dialog

    def ask(self, tool: OfferedTool, arguments: dict, answer: Callable[[str], None]) -> None:
        """Ask before a call (window-modal, not blocking the event loop); `answer` gets run, always or deny."""
        box = QMessageBox(QMessageBox.Icon.Question, "Run a tool?",
                          f"The model asks to run {tool.name} of the MCP server '{tool.server}'.", parent=self._window)
        box.setObjectName("toolApprovalDialog")
        box.setInformativeText("Arguments:\n" + json.dumps(arguments, indent=2, ensure_ascii=False)[:2000])
        buttons = {box.addButton(text, QMessageBox.ButtonRole.AcceptRole if key != "deny"
                                 else QMessageBox.ButtonRole.RejectRole): key for key, text in ANSWERS.items()}
        box.finished.connect(lambda _: answer(buttons.get(box.clickedButton(), "deny")))
        self.approval_box = box
        box.open()

    def close(self) -> None:
        self.runner.close()

    def _tools_text(self) -> str:
        lines = [f"• {tool.offered_name} ({tool.server}): {tool.description.splitlines()[0] if tool.description else ''}"
                 for tool in self.runner.tools]
        lines += [f"⚠ {problem}" for problem in self.runner.problems]
        if self._model_takes_tools is False:
            lines.insert(0, "The loaded model's chat template cannot take tools: none are offered to it.")
        return "\n".join(lines) or "No tools yet."

    @Slot(tuple)
    def _on_dialog_servers_changed(self, servers: tuple) -> None:
        self.runner.set_servers(servers)
        self.servers_saved.emit(servers)
        self._show_status()

    @Slot()
    def _show_status(self) -> None:
        self.label.setText(tools_status(self.runner, self._model_takes_tools))
        self.label.setToolTip("\n".join(f"{t.offered_name} ({t.server})" for t in self.runner.tools)
                              + "".join(f"\n{p}" for p in self.runner.problems))
        if self.dialog is not None:
            self.dialog.show_tools(self._tools_text())
