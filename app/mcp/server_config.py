"""An MCP server the user configured: a command started with its stdio, or a streamable-HTTP URL; and the common
`{"mcpServers": {...}}` JSON (Claude Desktop, Cursor, LM Studio) read into those. Plain Python, no Qt."""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field

APPROVALS = ("ask", "allow")  # ask before each call, or run this server's calls without asking


class McpConfigError(ValueError):
    """A server entry that cannot be used; the message names the entry and what it needs."""


@dataclass(frozen=True)
class McpServerConfig:
    name: str
    command: str = ""  # stdio: the program; its arguments in `args`
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict, repr=False)  # may hold API keys
    url: str = ""  # streamable HTTP: the endpoint, e.g. http://localhost:8000/mcp
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    approval: str = "ask"
    is_enabled: bool = True

    @property
    def is_stdio(self) -> bool:
        return bool(self.command)

    def describe(self) -> str:
        return shlex.join([self.command, *self.args]) if self.is_stdio else self.url

    def to_raw(self) -> dict:
        return {**asdict(self), "args": list(self.args)}


def server_from_entry(name: str, entry: object) -> McpServerConfig:
    """One entry of `mcpServers` (or of the settings file) -> a server; McpConfigError names what is wrong."""
    if not isinstance(name, str) or not name.strip():
        raise McpConfigError("an MCP server needs a name")
    if not isinstance(entry, dict):
        raise McpConfigError(f"MCP server '{name}' must be an object with a command or a url")
    command, url = entry.get("command", ""), entry.get("url", entry.get("serverUrl", ""))
    if not isinstance(command, str) or not isinstance(url, str) or bool(command) == bool(url):
        raise McpConfigError(f"MCP server '{name}' needs either a command (stdio) or a url (streamable HTTP)")
    if url and not url.startswith(("http://", "https://")):
        raise McpConfigError(f"MCP server '{name}': the url must start with http:// or https://, not {url[:40]!r}")
    args, env, headers = entry.get("args", []), entry.get("env", {}), entry.get("headers", {})
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise McpConfigError(f"MCP server '{name}': args must be a list of text")
    for label, mapping in (("env", env), ("headers", headers)):
        if not isinstance(mapping, dict) or not all(isinstance(v, str) for v in mapping.values()):
            raise McpConfigError(f"MCP server '{name}': {label} must map names to text")
    approval = entry.get("approval", "ask")
    if approval not in APPROVALS:
        raise McpConfigError(f"MCP server '{name}': approval is 'ask' or 'allow', not {approval!r}")
    return McpServerConfig(name.strip(), command, tuple(args), dict(env), url, dict(headers), approval,
                           entry.get("is_enabled", True) is not False)


def servers_from_json(text: str) -> list[McpServerConfig]:
    """`{"mcpServers": {NAME: {"command", "args", "env"} or {"url", "headers"}}}` (or the inner object alone)."""
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError) as err:
        raise McpConfigError(f"not JSON: {err}") from None
    servers = raw.get("mcpServers", raw) if isinstance(raw, dict) else None
    if not isinstance(servers, dict) or not servers:
        raise McpConfigError('expected {"mcpServers": {"name": {"command": ..., "args": [...]}}}')
    return [server_from_entry(name, entry) for name, entry in servers.items()]


def servers_from_settings(value: object) -> tuple[McpServerConfig, ...]:
    """The settings file's `mcp_servers` list; raises McpConfigError for the first entry that does not fit."""
    if not isinstance(value, list):
        raise McpConfigError("a list of MCP servers")
    return tuple(server_from_entry(entry.get("name") if isinstance(entry, dict) else None, entry) for entry in value)
