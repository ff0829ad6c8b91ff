"""The app's side of MCP tools (GUI thread): which tools the loaded model is offered, and one call at a time run
after the user allows it. The MCP client itself (app.mcp.tool_hub) works on its own thread; its futures finish
there and come back here through a queued signal, so every slot below runs on the GUI thread."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Callable

from PySide6.QtCore import QObject, Qt, Signal, Slot

from app.mcp.server_config import McpServerConfig
from app.mcp.tool_hub import McpHub, OfferedTool, ToolListing, ToolOutcome

NOT_ALLOWED = "The user did not allow this call; it was not run."
STOPPED = "Stopped by the user before the tool answered."
# asked for a call: returns "run", "always" (and from now on for this server) or "deny", through the callback
Approver = Callable[[OfferedTool, dict, Callable[[str], None]], None]


def call_arguments(text: str) -> dict | None:
    """The model's arguments (JSON text) as an object, or None when they are not a JSON object."""
    try:
        value = json.loads(text) if text.strip() else {}
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


class ToolRunner(QObject):
    tools_changed = Signal()  # `tools` and `problems` were listed again
    call_finished = Signal(str, object)  # call id, ToolOutcome
    servers_changed = Signal(tuple)  # the configured servers changed (an "always allow" answer): save them
    _outcome_ready = Signal(str, object)  # emitted on the MCP thread; queued to the GUI thread

    def __init__(self, servers: tuple[McpServerConfig, ...], approver: Approver, parent: QObject | None = None,
                 hub: McpHub | None = None):
        super().__init__(parent)
        self.servers = servers
        self.tools: tuple[OfferedTool, ...] = ()
        self.problems: tuple[str, ...] = ()
        self.is_listing = False
        self._approver = approver
        self._hub = hub or McpHub()
        self._futures: dict[str, object] = {}
        self._outcome_ready.connect(self._on_self_outcome_ready, Qt.ConnectionType.QueuedConnection)
        self._listed = _Relay(self)
        self._listed.arrived.connect(self._on_listed_arrived, Qt.ConnectionType.QueuedConnection)

    def set_servers(self, servers: tuple[McpServerConfig, ...]) -> None:
        self.servers = servers
        self.refresh()

    def refresh(self) -> None:
        """List the enabled servers' tools again (tools_changed when done)."""
        if not any(server.is_enabled for server in self.servers):
            self.tools, self.problems, self.is_listing = (), (), False
            self.tools_changed.emit()
            return
        self.is_listing = True
        future = self._hub.list_tools(self.servers)
        future.add_done_callback(lambda done: self._listed.arrived.emit(done))

    def offered_functions(self) -> tuple[dict, ...]:
        return tuple(tool.as_function() for tool in self.tools)

    def run(self, call_id: str, name: str, arguments_text: str) -> None:
        """Ask the user (unless the server is allowed), then call; call_finished(call_id, outcome) follows."""
        tool = next((tool for tool in self.tools if tool.offered_name == name), None)
        arguments = call_arguments(arguments_text)
        if tool is None:
            return self._finish_now(call_id, f"There is no tool named '{name}'.")
        if arguments is None:
            return self._finish_now(call_id, f"The arguments are not a JSON object: {arguments_text[:200]}")
        server = self._server(tool.server)
        if server is None:
            return self._finish_now(call_id, f"The server '{tool.server}' is no longer configured.")
        if server.approval == "allow":
            return self._call(call_id, server, tool, arguments)
        self._approver(tool, arguments, lambda answer: self._on_answer(call_id, tool, arguments, answer))

    def cancel(self, call_id: str) -> None:
        """Stop a call in flight (its server connection is closed); call_finished follows with STOPPED."""
        future = self._futures.pop(call_id, None)
        if future is not None:
            future.cancel()
        self._finish_now(call_id, STOPPED)

    def close(self) -> None:
        self._hub.close()

    def _on_answer(self, call_id: str, tool: OfferedTool, arguments: dict, answer: str) -> None:
        if answer == "deny":
            return self._finish_now(call_id, NOT_ALLOWED)
        server = self._server(tool.server)
        if answer == "always" and server is not None:
            server = replace(server, approval="allow")
            self.servers = tuple(server if s.name == server.name else s for s in self.servers)
            self.servers_changed.emit(self.servers)
        self._call(call_id, server, tool, arguments)

    def _call(self, call_id: str, server: McpServerConfig, tool: OfferedTool, arguments: dict) -> None:
        future = self._hub.call(server, tool.name, arguments)
        self._futures[call_id] = future
        future.add_done_callback(lambda done: self._on_future_done(call_id, done))

    def _on_future_done(self, call_id: str, future) -> None:  # the MCP thread
        if not future.cancelled():
            self._outcome_ready.emit(call_id, future.result())

    def _finish_now(self, call_id: str, text: str) -> None:
        self._outcome_ready.emit(call_id, ToolOutcome(text, True, 0.0))

    def _server(self, name: str) -> McpServerConfig | None:
        return next((server for server in self.servers if server.name == name), None)

    @Slot(str, object)
    def _on_self_outcome_ready(self, call_id: str, outcome: ToolOutcome) -> None:
        if self._futures.pop(call_id, None) is not None or outcome.seconds == 0.0:
            self.call_finished.emit(call_id, outcome)

    @Slot(object)
    def _on_listed_arrived(self, future) -> None:
        self.is_listing = False
        try:
            listing: ToolListing = future.result()
        except Exception as err:  # noqa: BLE001 - the listing never raises; a closed hub cancels it
            listing = ToolListing((), (f"the tools could not be listed ({type(err).__name__})",))
        self.tools, self.problems = listing.tools, listing.problems
        self.tools_changed.emit()


class _Relay(QObject):
    arrived = Signal(object)
