"""The MCP client: an asyncio loop on its own thread ("wisp-mcp") that lists the configured servers' tools and
runs tool calls with the `mcp` SDK. Callers on any thread get concurrent.futures.Future objects back.

Each listing and each call opens its own connection (a stdio server is started, used and stopped; an HTTP one
gets a fresh session), so a server that hangs, crashes or answers garbage fails that call alone: it ends with a
ToolOutcome whose `is_error` is set and whose text says what happened, and the next call starts afresh."""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass

from app.mcp.server_config import McpServerConfig

LIST_TIMEOUT_S = 20.0
CALL_TIMEOUT_S = 60.0
MAX_RESULT_CHARS = 20_000  # what one result may put into the context (the rest is cut, and the cut is said)


@dataclass(frozen=True)
class OfferedTool:
    """A server's tool as the model sees it; `offered_name` differs from `name` when two servers share a name."""

    server: str
    name: str
    offered_name: str
    description: str
    input_schema: dict

    def as_function(self) -> dict:
        """OpenAI's function-tool shape, as GenerateRequest.tools takes it."""
        return {"type": "function", "function": {"name": self.offered_name, "description": self.description,
                                                 "parameters": self.input_schema}}


@dataclass(frozen=True)
class ToolListing:
    tools: tuple[OfferedTool, ...]
    problems: tuple[str, ...]  # one line per server whose tools could not be listed


@dataclass(frozen=True)
class ToolOutcome:
    text: str  # what goes back to the model (the result, or why there is none)
    is_error: bool
    seconds: float


class McpHub:
    """Thread-safe. `close()` stops the loop thread (calls in flight end as errors)."""

    def __init__(self, call_timeout_s: float = CALL_TIMEOUT_S, list_timeout_s: float = LIST_TIMEOUT_S):
        self.call_timeout_s, self.list_timeout_s = call_timeout_s, list_timeout_s
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="wisp-mcp", daemon=True)
        self._thread.start()

    def list_tools(self, servers: tuple[McpServerConfig, ...]) -> Future:
        """Future[ToolListing] of the enabled servers' tools (any thread)."""
        return asyncio.run_coroutine_threadsafe(self._list_all(servers), self._loop)

    def call(self, server: McpServerConfig, tool: str, arguments: dict) -> Future:
        """Future[ToolOutcome] of one call (any thread); never fails: errors are outcomes."""
        return asyncio.run_coroutine_threadsafe(self._call(server, tool, arguments), self._loop)

    def close(self) -> None:
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)

    async def _list_all(self, servers: tuple[McpServerConfig, ...]) -> ToolListing:
        enabled = [server for server in servers if server.is_enabled]
        results = await asyncio.gather(*(self._list_one(server) for server in enabled))
        tools, problems = [], []
        for server, result in zip(enabled, results):
            (problems.append(result) if isinstance(result, str) else tools.extend((server.name, t) for t in result))
        counts: dict[str, int] = {}
        for _, tool in tools:
            counts[tool.name] = counts.get(tool.name, 0) + 1
        offered = tuple(OfferedTool(server, tool.name, tool.name if counts[tool.name] == 1 else f"{server}_{tool.name}",
                                    tool.description or "", tool.input_schema or {"type": "object"})
                        for server, tool in tools)
        return ToolListing(offered, tuple(problems))

    async def _list_one(self, server: McpServerConfig):
        try:
            async with asyncio.timeout(self.list_timeout_s):
                async with connect(server) as client:
                    return list((await client.list_tools()).tools)
        except TimeoutError:
            return f"{server.name}: no answer within {self.list_timeout_s:.0f} s"
        except Exception as err:  # noqa: BLE001 - any failure of one server is that server's line
            return f"{server.name}: {describe_error(err)}"

    async def _call(self, server: McpServerConfig, tool: str, arguments: dict) -> ToolOutcome:
        start = time.monotonic()
        stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        try:
            async with asyncio.timeout(self.call_timeout_s):
                async with connect(server, stderr) as client:
                    result = await client.call_tool(tool, arguments)
            text, is_error = result_text(result), bool(result.is_error)
        except TimeoutError:
            text, is_error = f"'{server.name}' did not answer within {self.call_timeout_s:.0f} s: the call was stopped", True
        except Exception as err:  # noqa: BLE001 - a crash or garbage fails this call alone
            text, is_error = f"'{server.name}' failed: {describe_error(err)}{last_line(stderr)}", True
        finally:
            stderr.close()
        return ToolOutcome(text, is_error, time.monotonic() - start)


def connect(server: McpServerConfig, stderr=None):
    """An mcp.Client for one use (`async with connect(server) as client`); a stdio server's stderr goes to
    `stderr` (a file) so that its last line can explain a crash."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client

    if server.is_stdio:
        parameters = StdioServerParameters(command=server.command, args=list(server.args), env=server.env or None)
        return Client(stdio_client(parameters, errlog=stderr) if stderr is not None else parameters)
    if not server.headers:
        return Client(server.url)
    import httpx2

    return Client(streamable_http_client(server.url, http_client=httpx2.AsyncClient(headers=server.headers)))


def result_text(result) -> str:
    """A CallToolResult's content as text for the model: text parts as they are, others named, JSON of structured
    content when there is no text; cut at MAX_RESULT_CHARS."""
    parts = []
    for block in result.content:
        kind = getattr(block, "type", "content")
        parts.append(block.text if kind == "text" else f"[{kind} content, not shown to the model]")
    if not parts and getattr(result, "structured_content", None) is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[cut: the result had {len(text):,} characters]"
    return text


def describe_error(err: BaseException) -> str:
    """One line for an exception, the innermost of an exception group."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    message = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {message}" if message else type(err).__name__


def last_line(stderr) -> str:
    stderr.seek(0)
    lines = [line.strip() for line in stderr.read().splitlines() if line.strip()]
    return f" (its last output: {lines[-1][:200]})" if lines else ""
