"""The MCP client against a real stdio server process (tests/app/mcp_test_server.py): tools listed, calls
answered, and a server that hangs, crashes or writes garbage failing that call alone, with a message that says so."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from app.mcp.server_config import McpServerConfig  # noqa: E402
from app.mcp.tool_hub import McpHub  # noqa: E402

SERVER = Path(__file__).with_name("mcp_test_server.py")
TOOLS = McpServerConfig("tools", command=sys.executable, args=(str(SERVER), "--misbehaving"))


@pytest.fixture(scope="module")
def hub():
    hub = McpHub(call_timeout_s=8.0, list_timeout_s=30.0)
    yield hub
    hub.close()


def test_tools_are_listed_and_answer(hub, tmp_path):
    listing = hub.list_tools((TOOLS,)).result(60)
    assert listing.problems == ()
    names = {tool.offered_name for tool in listing.tools}
    assert {"calculate", "read_file", "hang", "crash", "garbage"} <= names
    calculate = next(tool for tool in listing.tools if tool.name == "calculate")
    assert calculate.as_function()["function"]["parameters"]["properties"]["expression"]["type"] == "string"
    outcome = hub.call(TOOLS, "calculate", {"expression": "6 * 7"}).result(60)
    assert (outcome.text, outcome.is_error) == ("42", False) and outcome.seconds > 0
    (tmp_path / "note.txt").write_text("hello from a file")
    assert hub.call(TOOLS, "read_file", {"path": str(tmp_path / "note.txt")}).result(60).text == "hello from a file"


def test_a_tool_error_is_an_error_outcome(hub):
    outcome = hub.call(TOOLS, "calculate", {"expression": "__import__('os')"}).result(60)
    assert outcome.is_error and "only numbers" in outcome.text


@pytest.mark.parametrize("tool, expected", [("hang", "did not answer within 8 s"), ("crash", "failed"),
                                            ("garbage", "failed")])
def test_a_misbehaving_server_fails_that_call_alone(hub, tool, expected):
    outcome = hub.call(TOOLS, tool, {}).result(60)
    assert outcome.is_error and expected in outcome.text and outcome.seconds < 30
    assert hub.call(TOOLS, "calculate", {"expression": "1 + 1"}).result(60).text == "2"


def test_a_server_that_cannot_start_is_named_in_the_listing(hub):
    missing = McpServerConfig("missing", command="/nonexistent/mcp-server")
    listing = hub.list_tools((missing, TOOLS)).result(60)
    assert len(listing.problems) == 1 and listing.problems[0].startswith("missing: ")
    assert any(tool.name == "calculate" for tool in listing.tools)


def test_two_servers_with_one_tool_name_get_distinct_names(hub):
    twin = McpServerConfig("twin", command=sys.executable, args=(str(SERVER),))
    listing = hub.list_tools((TOOLS, twin)).result(60)
    names = [tool.offered_name for tool in listing.tools if tool.name == "calculate"]
    assert sorted(names) == ["tools_calculate", "twin_calculate"]
