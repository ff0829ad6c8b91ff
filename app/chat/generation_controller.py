"""Send, stop, regenerate, edit-and-resend and "continue this code" for the open conversation.

Runs on the GUI thread. Requests go to the engine with the EngineBridge's callback; their text comes back
through the bridge's queued signals. A streaming reply is saved about once a second and in full when it
finishes, so a crash loses at most a second of it."""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from dataclasses import dataclass, replace
from typing import Callable

from PySide6.QtCore import QObject, Signal, Slot

from app.chat.context_fit import DEFAULT_POLICY, ContextFit, ContextFullError, fit_context
from app.chat.conversation_model import ConversationModel, why_not_saved
from app.chat.conversation_store import Message
from app.chat.image_parts import content_with_images, estimated_tokens, sees_images
from app.chat.sampling_extras import SamplingExtras
from app.engine_api import api
from app.speculation_choice import request_mode
from app.chat.tool_turns import TOOL_PHASE, ToolTurns

log = logging.getLogger(__name__)
SAVE_INTERVAL_S = 1.0
CODE_STOPS = ("```",)


@dataclass(frozen=True)
class GenerationSettings:
    mode: str
    system_prompt: str
    temperature: float
    top_p: float
    max_tokens: int
    reasoning_effort: str | None = None  # low, medium, high; None: the chat template's default
    enable_thinking: bool | None = None  # False: no thinking (Qwen3's switch); None: the chat template's default
    extras: SamplingExtras = SamplingExtras()  # top-k, min-p, penalties, JSON output
    speculative: str = "off"  # Model → Draft tokens (app.speculation_choice.SPECULATIVE_CHOICES)


def drafts(settings: GenerationSettings) -> str:
    """GenerateRequest.speculative for these settings."""
    return request_mode(settings.speculative)


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


def estimate_tokens(messages: list[dict]) -> int:
    """Where the engine cannot count (a remote server): about four characters a token, a few per message."""
    return sum(estimated_tokens(m["content"]) + 4 for m in messages)


def prompt_content(message: Message) -> str:
    """What the model reads for a message: its attached context first, then the text."""
    context = message.info.get("context") if message.role == "user" else None
    return f"{context}\n\n{message.content}" if context else message.content


def template_turn(message: Message) -> dict:
    """A message as the chat template takes it: an assistant's tool calls (arguments as objects where they are
    JSON objects) and a tool's result with the id of the call it answers."""
    turn = {"role": message.role, "content": prompt_content(message)}
    calls = message.info.get("tool_calls") if message.role == "assistant" else None
    if calls:
        turn["tool_calls"] = [{"id": call["id"], "type": "function",
                               "function": {"name": call["name"], "arguments": json_object(call["arguments"])}}
                              for call in calls]
    if message.role == "tool":
        turn["tool_call_id"] = message.info.get("call_id", "")
    return turn


def json_object(text: str) -> object:
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return text
    return value if isinstance(value, dict) else text


class GenerationController(ToolTurns, QObject):
    busy_changed = Signal(bool)
    # the tokens the next turn sends (the history after the chat's context policy), the model's context length,
    # and how many earlier messages that leaves out
    context_used = Signal("qint64", "qint64", "qint64")
    failed = Signal(str)  # an engine error a user should see

    def __init__(self, model: ConversationModel, bridge, engine_source: Callable[[], object],
                 settings_source: Callable[[], GenerationSettings], parent: QObject | None = None,
                 policy_source: Callable[[], str] = lambda: DEFAULT_POLICY, tools=None,
                 attached_source: Callable[[], str] = lambda: ""):
        super().__init__(parent)
        self._attached_source = attached_source  # the context attached to the message being written
        self._tools = tools  # app.mcp.tool_runner.ToolRunner, or None: no tools are offered
        self._pending_calls: list[dict] = []
        self._tool_rounds = 0
        self._model, self._bridge = model, bridge
        self._engine_source, self._settings_source = engine_source, settings_source
        self._policy_source = policy_source
        self._context_info: dict = {}  # what the running request left out of the history
        self._request_id: str | None = None
        self._index = -1
        self._text = ""
        self._reasoning = ""
        self._last_save = 0.0
        bridge.text_arrived.connect(self._on_bridge_text_arrived)
        bridge.reasoning_arrived.connect(self._on_bridge_reasoning_arrived)
        bridge.finished.connect(self._on_bridge_finished)
        if tools is not None:
            tools.call_finished.connect(self._on_tools_call_finished)

    @property
    def is_busy(self) -> bool:
        return self._request_id is not None

    def can_send(self) -> bool:
        return not self.is_busy and self._engine_source() is not None

    def send(self, text: str, context: str = "", attachments: tuple[str, ...] = (), images: tuple[bytes, ...] = ()
             ) -> bool:
        """Ask `text`; `context` (attached files, formatted) goes to the model before it, and the message keeps
        it in its info with the attached paths, so that the bubble shows the question and chips, not the files.
        `images` (encoded files) go with the text; the conversation store keeps them and the message their digests."""
        info = {"context": context, "attachments": list(attachments)} if context else {}
        if images and self.can_send():
            try:
                info["images"] = [self._model.store.images.put(data) for data in images]
            except OSError as err:  # nothing was sent: the text and the images stay in the input box
                self.failed.emit(f"Your message was not sent because its images could not be saved: "
                                 f"{err.strerror or err}. It is still in the input box.")
                return False
        return self._ask(Message("user", text, info=info))

    def continue_code(self, code: str) -> bool:
        """Send code as a raw completion prompt: the model continues it instead of chatting about it. Trailing
        line breaks and spaces are left for the model to write: tokenizers merge a line break with the next line's
        indent ("\\n    " is one token), so a prompt ending in a bare line break reads as the end of a block."""
        return self._ask(Message("user", code.rstrip(), kind="completion"))

    def fill_code(self, prefix: str, suffix: str) -> bool:
        """Ask for the code between `prefix` and `suffix` (fill-in-the-middle; the model has FIM tokens)."""
        return self._ask(Message("user", prefix, kind="completion", info={"suffix": suffix}))

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
        if self._request_id == TOOL_PHASE:
            self._stop_tools()
            return
        engine = self._engine_source()
        if self._request_id is not None and engine is not None:
            engine.cancel(self._request_id)

    def abandon(self) -> None:
        """Stop now and keep what arrived (another conversation is opened, or the model goes away)."""
        if self._request_id is None:
            return
        if self._request_id == TOOL_PHASE:
            self._stop_tools()
            return
        self.stop()
        info = {**self._model.messages[self._index].info, "reason": "cancelled"}
        info.pop("streaming", None)
        if self._reasoning:
            info["reasoning"] = self._reasoning
        self._model.set_content(self._index, self._text, info)
        self._set_request(None)

    def _ask(self, message: Message) -> bool:
        if not self.can_send() or not (message.content.strip() or message.info.get("images")):
            return False
        self._tool_rounds = 0
        settings = self._settings_source()
        problem = settings.extras.schema_problem()
        if problem:  # a settings mistake: nothing is sent and the text stays in the input box
            self.failed.emit(problem)
            return False
        problem = self._context_problem(message)
        if problem:  # the chat is full and its policy is to stop: nothing is kept, the text stays in the input box
            self.failed.emit(problem)
            self.refresh_context()
            return False
        try:
            self._model.ensure_conversation(settings.mode, settings.system_prompt, message.content)
            self._model.append(message)
        except sqlite3.Error as err:  # nothing was sent: the text stays in the input box
            self.failed.emit(f"Your message was not sent because it could not be saved: {why_not_saved(err)}. "
                             "It is still in the input box.")
            return False
        self._start()  # a refused reply says why under the message, which stays in the conversation
        return True

    def _context_problem(self, message: Message) -> str | None:
        """Why `message` cannot be sent with the history the chat's policy keeps (None when it can)."""
        if message.kind != "chat":
            return None
        history = [m for m in self._model.messages if not m.is_empty_failure]
        try:
            self._fit([*history, message])
        except ContextFullError as err:
            return str(err)
        except api().WispError:
            return None  # the request itself reports it
        return None

    def _start(self) -> bool:
        history = self._model.messages
        self._text, self._reasoning, self._last_save = "", "", time.monotonic()
        try:
            request = self._request(history)
        except (api().WispError, ContextFullError) as err:
            self._index = self._model.append(Message("assistant", "", history[-1].kind))
            return self._refuse(str(err))
        info = {"streaming": True, **self._context_info}
        try:
            self._index = self._model.append(Message("assistant", "", history[-1].kind, info))
        except sqlite3.Error as err:
            self.failed.emit(f"The reply was not started because it could not be saved: {why_not_saved(err)}.")
            return False
        self._set_request(request.request_id)
        try:
            self._engine_source().submit(request, self._bridge.on_event)
        except api().WispError as err:
            return self._refuse(str(err))
        return True

    def _refuse(self, message: str) -> bool:
        """The request could not start: the reply says why (and is not sent back to the model later)."""
        self._end("", {**self._context_info, "reason": "error", "error": message})
        self.failed.emit(message)
        return False

    def _request(self, history: list[Message]):
        engine_api = api()
        settings = self._settings_source()
        problem = settings.extras.schema_problem()
        if problem:
            raise engine_api.WispError(problem)
        sampling = engine_api.SamplingParams(max_tokens=settings.max_tokens, temperature=settings.temperature,
                                             top_p=settings.top_p, **settings.extras.sampling_fields())
        self._context_info = {}
        if history[-1].kind == "completion":  # a chat model closing its code block ends the continuation
            return engine_api.GenerateRequest(prompt=history[-1].content, sampling=replace(sampling, stop=CODE_STOPS),
                                              suffix=history[-1].info.get("suffix"),
                                              speculative=drafts(settings))
        sent = [i for i, message in enumerate(history) if not message.is_empty_failure]
        fit = self._fit([history[i] for i in sent])
        if fit.dropped is not None:
            self._context_info = {"dropped": [sent[fit.dropped[0]], sent[fit.dropped[1]]],
                                  "context_tokens": fit.num_tokens}
        return self._chat_request([history[sent[i]] for i in fit.kept], sampling)

    def _chat_request(self, messages: list[Message], sampling=None):
        engine_api = api()
        settings = self._settings_source()
        return engine_api.GenerateRequest(messages=tuple(self._chat_messages(messages)),
                                          sampling=sampling or engine_api.SamplingParams(),
                                          reasoning_effort=settings.reasoning_effort,
                                          enable_thinking=settings.enable_thinking, tools=self._offered_tools(),
                                          speculative=drafts(settings))

    def _chat_messages(self, messages: list[Message]) -> list[dict]:
        prompt = self._settings_source().system_prompt
        system = [{"role": "system", "content": prompt}] if prompt.strip() else []
        # replies go back as their answers alone: chat templates (gpt-oss's harmony) drop earlier reasoning
        return system + [self._with_images(template_turn(m), m) for m in messages]

    def _with_images(self, turn: dict, message: Message) -> dict:
        """The turn with its message's images, for a model that takes them (to one that does not, the text alone)."""
        engine = self._engine_source()
        digests = message.info.get("images") if message.role == "user" else None
        if not digests or not sees_images(engine):
            return turn
        images = [data for data in map(self._model.store.images.get, digests) if data is not None]
        return {**turn, "content": content_with_images(turn["content"], images)}

    def _count(self, messages: list[Message]) -> int:
        """Tokens of a prompt made of these messages, counted by the engine (its template and tokenizer)."""
        chat = self._chat_messages(messages)
        if not chat:
            return 0
        counter = getattr(self._engine_source(), "count_prompt_tokens", None)
        counted = counter(self._chat_request(messages)) if counter is not None else None
        return estimate_tokens(chat) if counted is None else counted

    def _fit(self, messages: list[Message]) -> ContextFit:
        """Which of these messages the next request sends, by the open chat's context policy; room is kept for
        the reply (max tokens, at most a quarter of the context) when turns must be dropped anyway."""
        maximum = self._engine_source().info.max_model_len
        reserve = min(self._settings_source().max_tokens, maximum // 4)
        return fit_context([m.role for m in messages], lambda kept: self._count([messages[i] for i in kept]),
                           maximum - reserve, self._policy_source(), maximum)

    def refresh_context(self) -> None:
        """Emit context_used for the history as it is now (GUI thread; waits for the engine's current step, so
        it does nothing while a reply streams: the reply's end calls it)."""
        engine = self._engine_source()
        if engine is None or self.is_busy:
            return
        messages = [m for m in self._model.messages if not m.is_empty_failure]
        attached = self._attached_source()
        if attached:  # files attached to the next message count before it is sent
            messages.append(Message("user", "", info={"context": attached}))
        try:
            fit = self._fit(messages) if messages else ContextFit((), self._count([]))
            used, num_dropped = fit.num_tokens, fit.num_dropped
        except ContextFullError:
            used, num_dropped = self._count(messages), 0
        except api().WispError:
            return
        self.context_used.emit(used, engine.info.max_model_len, num_dropped)

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
        info = {**self._context_info, **finish_info(event)}
        if event.tool_calls and self._tools is not None and event.reason not in ("error", "cancelled"):
            self._run_tools(event, info)
            return
        self._end(event.text, info)
        self.refresh_context()
        if event.reason == "error":
            self.failed.emit(event.error or "generation failed")
