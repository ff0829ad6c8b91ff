"""An engine.api.Engine stand-in that answers every request with a scripted reply, token by token: what a
reasoning model's engine emits (answer and reasoning pieces), for the CLI, the server and the app to show."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from types import SimpleNamespace

from engine.api import FinishEvent, RequestHandle, RequestStats, TokenEvent
from engine.errors import RequestError

LOGPROB = -0.25


@dataclass
class ScriptedEngine:
    """Each reply is a list of (answer text, reasoning text) pieces, one per token, and the tool calls it ends
    with. Events are delivered from another thread, as the engine thread delivers them; `requests` records what
    was asked. `sees_images`: the model takes image parts in a message's content (engine.api's contract); one
    that does not refuses a request with an image as the engine does."""

    pieces: list[tuple[str, str]]
    max_model_len: int = 4096
    requests: list = field(default_factory=list)
    tool_calls: tuple = ()
    sees_images: bool = False

    def __post_init__(self):
        self.info = SimpleNamespace(name="scripted", path="scripted", max_model_len=self.max_model_len,
                                    has_chat_template=True, device="cpu", tool_calls=True)
        self.tokenizer = None  # engine.server.ServedModel reads the engine's tokenizer: none here

    def submit(self, request, callback=None) -> RequestHandle:
        if not self.sees_images and request_images(request):
            raise RequestError("this model does not take images (it has no vision tower)", "messages")
        self.requests.append(request)
        handle = RequestHandle(request.request_id)
        threading.Thread(target=self._deliver, args=(request.request_id, handle, callback), daemon=True).start()
        return handle

    def generate(self, request) -> FinishEvent:
        return self.submit(request).result()

    def cancel(self, request_id: str) -> None:
        pass

    def _deliver(self, request_id: str, handle: RequestHandle, callback) -> None:
        for event in self.events(request_id):
            handle.events.put(event)
            if callback is not None:
                callback(event)

    def events(self, request_id: str) -> list:
        tokens = [TokenEvent(request_id, index, text, LOGPROB, reasoning)
                  for index, (text, reasoning) in enumerate(self.pieces)]
        num = len(tokens)
        stats = RequestStats(prompt_tokens=5, cached_prompt_tokens=0, generated_tokens=num, ttft_s=0.01,
                             decode_tok_s=100.0, total_s=0.1, num_preemptions=0)
        finish = FinishEvent(request_id, "stop", "".join(t for t, _ in self.pieces), tuple(range(num)),
                             (LOGPROB,) * num, stats, reasoning="".join(r for _, r in self.pieces),
                             tool_calls=self.tool_calls)
        return [*tokens, finish]


def request_images(request) -> list[bytes]:
    """The encoded images of a chat request's messages, in order."""
    return [part["image"] for message in request.messages or () if isinstance(message["content"], (list, tuple))
            for part in message["content"] if part.get("type") == "image"]


# A gpt-oss-like reply as the engine streams it: reasoning pieces first, then the answer.
REASONING_REPLY = [("", "The user"), ("", " greets me."), ("", " Reply briefly."), ("Hello", ""), (" there!", "")]
