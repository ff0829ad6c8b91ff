"""Send, stop, regenerate, edit-and-resend and "continue this code" for the open conversation.

Runs on the GUI thread. Requests go to the engine with the EngineBridge's callback; their text comes back
through the bridge's queued signals. A streaming reply is saved about once a second and in full when it
finishes, so a crash loses at most a second of it."""

from __future__ import annotations

import logging
import sqlite3
import time
from dataclasses import dataclass
from typing import Callable

from PySide6.QtCore import QObject, Signal, Slot

from app.chat.conversation_model import ConversationModel, why_not_saved
from app.chat.conversation_store import Message
from app.engine_api import api

log = logging.getLogger(__name__)
SAVE_INTERVAL_S = 1.0


@dataclass(frozen=True)
class GenerationSettings:
    mode: str
    system_prompt: str
    temperature: float
    top_p: float
    max_tokens: int
    reasoning_effort: str | None = None  # low, medium, high; None: the chat template's default
    enable_thinking: bool | None = None  # False: no thinking (Qwen3's switch); None: the chat template's default


def finish_info(event) -> dict:
    stats = event.stats
    info = {"reason": event.reason, "ttft_s": stats.ttft_s, "decode_tok_s": stats.decode_tok_s,
            "prompt_tokens": stats.prompt_tokens, "cached_prompt_tokens": stats.cached_prompt_tokens,
            "generated_tokens": stats.generated_tokens}
    if event.error:
        info["error"] = event.error
    if event.reasoning:
        info["reasoning"] = event.reasoning
    return info


def prompt_content(message: Message) -> str:
    """What the model reads for a message: its attached context first, then the text."""
    context = message.info.get("context") if message.role == "user" else None
    return f"{context}\n\n{message.content}" if context else message.content


class GenerationController(QObject):
    busy_changed = Signal(bool)
    context_used = Signal("qint64", "qint64")  # tokens in the last request (prompt + reply), the model's context length
    failed = Signal(str)  # an engine error a user should see

    def __init__(self, model: ConversationModel, bridge, engine_source: Callable[[], object],
                 settings_source: Callable[[], GenerationSettings], parent: QObject | None = None):
        super().__init__(parent)
        self._model, self._bridge = model, bridge
        self._engine_source, self._settings_source = engine_source, settings_source
        self._request_id: str | None = None
        self._index = -1
        self._text = ""
        self._reasoning = ""
        self._last_save = 0.0
        bridge.text_arrived.connect(self._on_bridge_text_arrived)
        bridge.reasoning_arrived.connect(self._on_bridge_reasoning_arrived)
        bridge.finished.connect(self._on_bridge_finished)

    @property
    def is_busy(self) -> bool:
        return self._request_id is not None

    def can_send(self) -> bool:
        return not self.is_busy and self._engine_source() is not None

    def send(self, text: str, context: str = "", attachments: tuple[str, ...] = ()) -> bool:
        """Ask `text`; `context` (attached files, formatted) goes to the model before it, and the message keeps
        it in its info with the attached paths, so that the bubble shows the question and chips, not the files."""
        info = {"context": context, "attachments": list(attachments)} if context else {}
        return self._ask(Message("user", text, info=info))

    def continue_code(self, code: str) -> bool:
        """Send code as a raw completion prompt: the model continues it instead of chatting about it."""
        return self._ask(Message("user", code, kind="completion"))

    def regenerate(self, index: int) -> bool:
        """Replace the assistant message at `index` (and everything after it) with a new reply."""
        messages = self._model.messages
        if not self.can_send() or not 0 < index < len(messages) or messages[index].role != "assistant":
            return False
        self._model.truncate(index)
        return self._start()

    def edit_and_resend(self, index: int, text: str) -> bool:
        """Change the user message at `index`, drop what followed it, and ask again."""
        messages = self._model.messages
        if not self.can_send() or not 0 <= index < len(messages) or messages[index].role != "user":
            return False
        self._model.set_content(index, text)
        self._model.truncate(index + 1)
        return self._start()

    def stop(self) -> None:
        engine = self._engine_source()
        if self._request_id is not None and engine is not None:
            engine.cancel(self._request_id)

    def abandon(self) -> None:
        """Stop now and keep what arrived (another conversation is opened, or the model goes away)."""
        if self._request_id is None:
            return
        self.stop()
        info = {**self._model.messages[self._index].info, "reason": "cancelled"}
        info.pop("streaming", None)
        if self._reasoning:
            info["reasoning"] = self._reasoning
        self._model.set_content(self._index, self._text, info)
        self._set_request(None)

    def _ask(self, message: Message) -> bool:
        if not self.can_send() or not message.content.strip():
            return False
        settings = self._settings_source()
        try:
            self._model.ensure_conversation(settings.mode, settings.system_prompt, message.content)
            self._model.append(message)
        except sqlite3.Error as err:  # nothing was sent: the text stays in the input box
            self.failed.emit(f"Your message was not sent because it could not be saved: {why_not_saved(err)}. "
                             "It is still in the input box.")
            return False
        return self._start()

    def _start(self) -> bool:
        history = self._model.messages
        request = self._request(history)
        try:
            self._index = self._model.append(Message("assistant", "", history[-1].kind, {"streaming": True}))
        except sqlite3.Error as err:
            self.failed.emit(f"The reply was not started because it could not be saved: {why_not_saved(err)}.")
            return False
        self._text, self._reasoning, self._last_save = "", "", time.monotonic()
        self._set_request(request.request_id)
        try:
            self._engine_source().submit(request, self._bridge.on_event)
        except api().WispError as err:
            self._end("", {"reason": "error", "error": str(err)})
            self.failed.emit(str(err))
            return False
        return True

    def _request(self, history: list[Message]):
        engine_api = api()
        settings = self._settings_source()
        sampling = engine_api.SamplingParams(max_tokens=settings.max_tokens, temperature=settings.temperature,
                                             top_p=settings.top_p)
        if history[-1].kind == "completion":
            return engine_api.GenerateRequest(prompt=history[-1].content, sampling=sampling)
        system = [{"role": "system", "content": settings.system_prompt}] if settings.system_prompt.strip() else []
        # replies go back as their answers alone: chat templates (gpt-oss's harmony) drop earlier reasoning
        chat = [{"role": m.role, "content": prompt_content(m)} for m in history]
        return engine_api.GenerateRequest(messages=tuple(system + chat), sampling=sampling,
                                          reasoning_effort=settings.reasoning_effort,
                                          enable_thinking=settings.enable_thinking)

    def _set_request(self, request_id: str | None) -> None:
        was_busy = self.is_busy
        self._request_id = request_id
        if was_busy != self.is_busy:
            self.busy_changed.emit(self.is_busy)

    def _end(self, text: str, info: dict) -> None:
        self._model.set_content(self._index, text, info)
        self._set_request(None)

    @Slot(str, str)
    def _on_bridge_text_arrived(self, request_id: str, text: str) -> None:
        if request_id == self._request_id:
            self._text += text
            self._show_progress()

    @Slot(str, str)
    def _on_bridge_reasoning_arrived(self, request_id: str, reasoning: str) -> None:
        if request_id == self._request_id:
            self._reasoning += reasoning
            self._show_progress()

    def _show_progress(self) -> None:
        now = time.monotonic()
        is_due = now - self._last_save >= SAVE_INTERVAL_S
        if is_due:
            self._last_save = now
        info = {**self._model.messages[self._index].info, "reasoning": self._reasoning} if self._reasoning else None
        self._model.set_content(self._index, self._text, info, persist=is_due)

    @Slot(object)
    def _on_bridge_finished(self, event) -> None:
        if event.request_id != self._request_id:
            return
        self._end(event.text, finish_info(event))
        engine = self._engine_source()
        if engine is not None:
            used = event.stats.prompt_tokens + event.stats.generated_tokens
            self.context_used.emit(used, engine.info.max_model_len)
        if event.reason == "error":
            self.failed.emit(event.error or "generation failed")
