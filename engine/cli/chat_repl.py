"""`wisp chat`'s conversation: slash commands, streamed replies that Ctrl+C stops without losing the
conversation, and one error line for a message the engine refuses."""

from __future__ import annotations

import base64
import json
import sys

from engine.api import REASONING_EFFORTS, Engine, FinishEvent, GenerateRequest, SamplingParams, TokenEvent
from engine.cli.chat_input import BadLine
from engine.errors import WispError
from engine.vision.image_input import check_images
from engine.cli.reply_printer import ReplyPrinter

HELP = """commands:
  /help         this list
  /reset        forget the conversation (the system prompt stays)
  /save FILE    write the conversation to FILE as JSON (a list of {role, content})
  /effort LEVEL reasoning effort for the next replies: low, medium, high or default (gpt-oss)
  /think on|off thinking before the next replies, or default (Qwen3)
  /image PATH   attach an image (PNG, JPEG, WebP, GIF) to the next message (repeatable)
  /exit         quit (also /quit or Ctrl+D)
keys (terminal): Enter sends; Alt+Enter or Esc then Enter starts a new line; a paste stays one message;
  Ctrl+C stops a reply and keeps the conversation; Up/Down walk the history."""


def base64_text(value: object) -> str:
    """/save writes an image part's bytes as base64 text."""
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON")


class ChatSession:
    """One conversation with a loaded engine; `handle(line)` takes each message or command."""

    def __init__(self, engine: Engine, sampling: SamplingParams, system: str | None = None, out=None, err=None,
                 reasoning_effort: str | None = None, enable_thinking: bool | None = None):
        self.engine, self.sampling, self.system = engine, sampling, system
        self.reasoning_effort, self.enable_thinking = reasoning_effort, enable_thinking
        self.out, self.err = out or sys.stdout, err or sys.stderr
        self.turns: list[dict] = []
        self.images: list[bytes] = []  # attached to the next message (/image)

    def messages(self) -> list[dict]:
        return ([{"role": "system", "content": self.system}] if self.system else []) + self.turns

    def run(self, reader) -> None:
        """Read messages until the end of the input or /exit."""
        while True:
            try:
                line = reader.read()
            except BadLine as error:
                self.note(f"wisp: error: {error}")
                continue
            if line is None or not self.handle(line):
                return

    def handle(self, line: str) -> bool:
        """Answer one message or run one command; False to end the session."""
        text = line.strip()
        if not text:
            return True
        if text.startswith("/"):
            return self.command(text)
        self.reply(line)
        return True

    def command(self, text: str) -> bool:
        name, _, argument = text.partition(" ")
        if name in ("/exit", "/quit"):
            return False
        if name == "/help":
            self.note(HELP)
        elif name == "/reset":
            dropped = len(self.turns)
            self.turns, self.images = [], []
            self.note(f"[conversation cleared: {dropped} messages forgotten]")
        elif name == "/save":
            self.save(argument.strip())
        elif name == "/effort":
            self.set_effort(argument.strip())
        elif name == "/think":
            self.set_thinking(argument.strip())
        elif name == "/image":
            self.attach(argument.strip())
        else:
            self.note(f"wisp: error: unknown command {name}; /help lists the commands")
        return True

    def set_effort(self, level: str) -> None:
        if level not in (*REASONING_EFFORTS, "default"):
            self.note(f"wisp: error: /effort takes {', '.join(REASONING_EFFORTS)} or default "
                      f"(now: {self.reasoning_effort or 'default'})")
            return
        self.reasoning_effort = None if level == "default" else level
        unused = "" if self.engine.info.reasoning_effort else " (this model's chat template takes none)"
        self.note(f"[reasoning effort: {level}{unused}]")

    def set_thinking(self, switch: str) -> None:
        choices = {"on": True, "off": False, "default": None}
        if switch not in choices:
            now = {True: "on", False: "off", None: "default"}[self.enable_thinking]
            self.note(f"wisp: error: /think takes on, off or default (now: {now})")
            return
        self.enable_thinking = choices[switch]
        unused = "" if self.engine.info.thinking_switch else " (this model's chat template has no switch)"
        self.note(f"[thinking: {switch}{unused}]")

    def attach(self, path: str) -> None:
        if not path:
            self.note("wisp: error: /image needs a file name, e.g. /image screenshot.png")
            return
        if not self.engine.sees_images:
            self.note(f"wisp: error: this model does not take images ({self.engine.info.model_type})")
            return
        try:
            with open(path, "rb") as file:
                data = file.read()
            check_images([*self.images, data])
        except OSError as error:
            self.note(f"wisp: error: cannot read {path!r}: {error.strerror or error}")
            return
        except WispError as error:
            self.note(f"wisp: error: {path}: {error}")
            return
        self.images.append(data)
        self.note(f"[image {len(self.images)} attached to the next message: {path}, {len(data) / 1e3:.0f} kB]")

    def save(self, path: str) -> None:
        if not path:
            self.note("wisp: error: /save needs a file name, e.g. /save chat.json")
            return
        try:
            with open(path, "w", encoding="utf-8") as file:
                json.dump(self.messages(), file, ensure_ascii=False, indent=2, default=base64_text)
        except (OSError, ValueError) as error:  # ValueError: a name with a NUL or an unencodable character
            self.note(f"wisp: error: cannot write {path!r}: {getattr(error, 'strerror', None) or error}")
            return
        self.note(f"[saved {len(self.messages())} messages to {path}]")

    def reply(self, line: str) -> None:
        content = [*({"type": "image", "image": data} for data in self.images), {"type": "text", "text": line}]
        turn = {"role": "user", "content": content if self.images else line}
        try:
            request = GenerateRequest(messages=tuple(self.messages() + [turn]),
                                      sampling=self.sampling, reasoning_effort=self.reasoning_effort,
                                      enable_thinking=self.enable_thinking)
        except WispError as error:
            self.note(f"wisp: error: {error}")
            return
        finish = self.stream(request)
        if finish.reason == "error":
            self.note(f"wisp: error: {finish.error}")
            return
        # the answer alone: chat templates (gpt-oss's harmony) take earlier turns without their reasoning
        self.turns += [turn, {"role": "assistant", "content": finish.text}]
        self.images = []
        s = finish.stats
        stopped = " - stopped" if finish.reason == "cancelled" else ""
        self.note(f"[{s.prompt_tokens} prompt tokens ({s.cached_prompt_tokens} cached), {s.generated_tokens} "
                  f"generated, {s.decode_tok_s:.1f} tok/s{stopped}]")

    def stream(self, request: GenerateRequest) -> FinishEvent:
        """Print the reply as it comes (a reasoning model's reasoning apart, engine.cli.reply_printer); Ctrl+C cancels
        it and returns what was generated so far."""
        handle = self.engine.submit(request)
        printer = ReplyPrinter(self.out, self.err)
        try:
            for event in handle:
                if isinstance(event, TokenEvent):
                    printer.write(event.text, event.reasoning)
        except KeyboardInterrupt:
            self.engine.cancel(request.request_id)
            handle.result()
        printer.finish(handle.finish.text, handle.finish.reasoning)
        return handle.finish

    def note(self, text: str) -> None:
        print(text, file=self.err, flush=True)
