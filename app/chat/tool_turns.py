"""The tool turns of a chat (GUI thread): a reply's tool calls are kept in its message, each call becomes a "tool"
message that is run (after the user allows it, by app.mcp.tool_runner.ToolRunner) and shows its result, and then
the model is asked again with the results, until it answers without calling a tool (at most MAX_TOOL_ROUNDS
replies in a row)."""

from __future__ import annotations

import uuid

from PySide6.QtCore import Slot

from app.chat.conversation_store import Message
from app.mcp.tool_runner import STOPPED as STOPPED_TEXT

MAX_TOOL_ROUNDS = 8  # replies in a row that call tools before the loop stops and says so
TOOL_PHASE = "tools"  # the request id while tool calls run (no engine request is in flight)


class ToolTurns:
    """GenerationController's tool turns. It provides `_tools` (a ToolRunner or None), `_model`, `_index`,
    `_request_id`, `_pending_calls`, `_tool_rounds`, `_engine_source`, `_start()`, `_set_request()` and `failed`."""

    def _offered_tools(self) -> tuple[dict, ...] | None:
        """The MCP tools, for a model whose chat template takes them (ModelInfo.tool_calls); None otherwise."""
        engine = self._engine_source()
        if self._tools is None or engine is None or not engine.info.tool_calls:
            return None
        return self._tools.offered_functions() or None

    def _run_tools(self, event, info: dict) -> None:
        """The reply `event` (a FinishEvent) made tool calls: keep them in its message, then run them in turn."""
        calls = [{"id": f"call_{uuid.uuid4().hex[:12]}", "name": call.name, "arguments": call.arguments}
                 for call in event.tool_calls]
        self._model.set_content(self._index, event.text, {**info, "tool_calls": calls})
        self._tool_rounds += 1
        self._pending_calls = list(calls)
        self._request_id = TOOL_PHASE  # still busy: no engine request, the tools run
        self._run_next_call()

    def _run_next_call(self) -> None:
        if not self._pending_calls:
            if self._tool_rounds >= MAX_TOOL_ROUNDS:
                self._set_request(None)
                self.failed.emit(f"The model called tools {MAX_TOOL_ROUNDS} times in a row; Wisp stopped there. "
                                 "Send a message to let it go on.")
                return
            if not self._start() and self._request_id == TOOL_PHASE:
                self._set_request(None)
            return
        call = self._pending_calls.pop(0)
        info = {"call_id": call["id"], "name": call["name"], "arguments": call["arguments"], "running": True}
        self._index = self._model.append(Message("tool", "", info=info))
        self._tools.run(call["id"], call["name"], call["arguments"])

    def _stop_tools(self) -> None:
        """Stop the call in flight (its server connection closes) and skip the rest; the model is not asked again."""
        self._pending_calls = []
        message = self._model.messages[self._index] if 0 <= self._index < len(self._model.messages) else None
        if message is not None and message.role == "tool" and message.info.get("running"):
            self._tools.cancel(message.info["call_id"])
            info = {**message.info, "is_error": True, "reason": "cancelled"}
            info.pop("running", None)
            self._model.set_content(self._index, STOPPED_TEXT, info)
        self._set_request(None)

    @Slot(str, object)
    def _on_tools_call_finished(self, call_id: str, outcome) -> None:
        if self._request_id != TOOL_PHASE or not 0 <= self._index < len(self._model.messages):
            return
        message = self._model.messages[self._index]
        if message.role != "tool" or message.info.get("call_id") != call_id:
            return
        info = {**message.info, "is_error": outcome.is_error, "seconds": round(outcome.seconds, 3)}
        info.pop("running", None)
        self._model.set_content(self._index, outcome.text, info)
        self._run_next_call()
