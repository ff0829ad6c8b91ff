"""One remote request's worker thread: it streams the server's SSE answer and turns each chunk into Pieces
(tokens, trailing text, the end, or an error) on the remote core's queue. It never raises: whatever goes
wrong ends the request with an error Piece, so that no caller waits forever."""

from __future__ import annotations

import json
import math
import queue
import threading
from dataclasses import dataclass

import httpx

from engine.events import ErrorKind


@dataclass(frozen=True)
class Piece:
    """What a worker read: a token ("token"), text after the last token ("tail"), the end ("end") or
    an error ("error")."""

    kind: str
    request_id: str
    text: str = ""
    token_id: int = -1
    logprob: float = math.nan
    reason: str = "stop"
    usage: dict | None = None
    reasoning: str = ""  # a reasoning model's reasoning (the server's `reasoning_content` deltas)
    error_kind: ErrorKind = ErrorKind.FAILED  # an error's: the remote server refused the request, or failed


class StreamWorker:
    def __init__(self, client: httpx.Client, request_id: str, path: str, body: dict, out: queue.Queue):
        self.client, self.request_id, self.path, self.body, self.out = client, request_id, path, body, out
        self.is_cancelled = False
        self.reason, self.usage = "stop", None
        self.thread = threading.Thread(target=self.run, name=f"wisp-remote-{request_id[:8]}", daemon=True)

    def run(self) -> None:
        try:
            with self.client.stream("POST", self.path, json=self.body) as response:
                if response.status_code != 200:
                    kind = ErrorKind.FAILED if response.status_code >= 500 else ErrorKind.REFUSED
                    self.put("error", text=http_error(response), error_kind=kind)
                    return
                if self.read_events(response.iter_lines()):
                    self.put("end", reason=self.reason, usage=self.usage)
        except Exception as error:  # a lost connection or a garbled stream: the request must still finish
            if not self.is_cancelled:
                self.put("error", text=f"generation failed: the remote stream broke: {type(error).__name__}: {error}")

    def read_events(self, lines) -> bool:
        """-> whether the stream ended normally (not cancelled, no error)."""
        for line in lines:
            if self.is_cancelled:
                return False
            if not line.startswith("data:"):
                continue
            data = line[len("data:"):].strip()
            if data == "[DONE]":
                break
            if not self.on_chunk(json.loads(data)):
                return False
        return not self.is_cancelled

    def on_chunk(self, chunk: dict) -> bool:
        if "error" in chunk:
            self.put("error", text=f"the remote server failed: {error_message(chunk)}")
            return False
        self.usage = chunk.get("usage") or self.usage
        for choice in chunk.get("choices") or []:
            self.on_choice(choice)
        return True

    def on_choice(self, choice: dict) -> None:
        delta = choice.get("delta") or {}
        text = delta.get("content") or choice.get("text") or ""
        reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""  # vLLM's and Ollama's names
        tokens = logprob_entries(choice.get("logprobs"))
        for index, (token_id, logprob) in enumerate(tokens):
            is_last = index == len(tokens) - 1
            self.put("token", text=text if is_last else "", reasoning=reasoning if is_last else "",
                     token_id=token_id, logprob=logprob)
        if (text or reasoning) and not tokens:
            self.put("tail" if choice.get("finish_reason") else "token", text=text, reasoning=reasoning)
        if choice.get("finish_reason"):
            self.reason = "length" if choice["finish_reason"] == "length" else "stop"

    def put(self, kind: str, **fields) -> None:
        self.out.put(Piece(kind, self.request_id, **fields))


def logprob_entries(logprobs) -> list[tuple[int, float]]:
    """(token id, logprob) of each token in a chunk, from chat (`content`) or completions (`tokens`)."""
    if not logprobs:
        return []
    if logprobs.get("content") is not None:
        return [(token_id_of(e.get("token")), _float(e.get("logprob"))) for e in logprobs["content"]]
    tokens = logprobs.get("tokens") or []
    return [(token_id_of(t), _float(lp)) for t, lp in zip(tokens, logprobs.get("token_logprobs") or [])]


def token_id_of(token) -> int:
    if isinstance(token, str) and token.startswith("token_id:"):
        return int(token[len("token_id:"):])
    return -1


def _float(value) -> float:
    return math.nan if value is None else float(value)


def error_message(obj) -> str:
    error = obj.get("error") if isinstance(obj, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error)
    return str(error or obj)


def http_error(response: httpx.Response) -> str:
    response.read()
    try:
        message = error_message(response.json())
    except ValueError:
        message = response.text[:500]
    status = response.status_code
    if status >= 500:
        return f"generation failed: the remote server failed (HTTP {status}): {message}"
    return f"the remote server refused the request (HTTP {status}): {message}"
