"""A small real MCP server for the app's tests, run as `python tests/app/mcp_test_server.py [--misbehaving]` over
stdio: a file reader and a calculator; with --misbehaving also tools that misbehave on purpose (one hangs, one kills
its process, one answers with a line that is not JSON-RPC)."""

from __future__ import annotations

import ast
import operator
import os
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("wisp-test-tools")
OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        return OPERATORS[type(node.op)](evaluate(node.left), evaluate(node.right))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -evaluate(node.operand)
    raise ToolError("only numbers and + - * / are allowed")


@server.tool()
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression such as 6 * 7."""
    return str(evaluate(ast.parse(expression, mode="eval").body))


@server.tool()
def read_file(path: str) -> str:
    """Read a text file."""
    return Path(path).read_text(encoding="utf-8")


def hang(seconds: float = 3600) -> str:
    """Never answers in time."""
    time.sleep(seconds)
    return "late"


def crash() -> str:
    """Ends its process without answering."""
    print("about to crash on purpose", file=sys.stderr, flush=True)
    os._exit(3)


def garbage() -> str:
    """Writes a line that is not JSON-RPC where the answer should be, then stops."""
    os.write(1, b"this is not json\n")
    os._exit(0)


if __name__ == "__main__":
    if "--misbehaving" in sys.argv:
        for tool in (hang, crash, garbage):
            server.tool()(tool)
    server.run()
