"""Settings → MCP servers: the common `mcpServers` JSON imported (stdio and HTTP entries), a bad file refused in
one line with nothing lost, a server typed into the form, and the servers kept in settings.json."""

from __future__ import annotations

import json

import pytest

from app.mcp.mcp_servers_dialog import McpServersDialog
from app.mcp.server_config import McpConfigError, McpServerConfig, servers_from_json
from app.settings import AppSettings, SettingsStore

CLAUDE_STYLE = {"mcpServers": {
    "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/notes"],
              "env": {"TOKEN": "secret"}},
    "web": {"url": "http://localhost:8000/mcp", "headers": {"Authorization": "Bearer x"}},
}}


def test_the_common_json_is_imported():
    files, web = servers_from_json(json.dumps(CLAUDE_STYLE))
    assert (files.command, files.args, files.env) == ("npx", ("-y", "@modelcontextprotocol/server-filesystem",
                                                              "/home/me/notes"), {"TOKEN": "secret"})
    assert (web.url, web.headers, web.is_stdio, web.approval) == ("http://localhost:8000/mcp",
                                                                  {"Authorization": "Bearer x"}, False, "ask")


@pytest.mark.parametrize("text, named", [("{", "not JSON"), ('{"mcpServers": {"x": {}}}', "'x' needs either"),
                                         ('{"mcpServers": {"x": {"url": "ftp://a"}}}', "http://"),
                                         ('{"mcpServers": {"x": {"command": "a", "args": "b"}}}', "args")])
def test_a_bad_entry_is_named(text, named):
    with pytest.raises(McpConfigError, match=named):
        servers_from_json(text)


def test_the_dialog_imports_refuses_and_adds(qtbot):
    changes = []
    dialog = McpServersDialog((McpServerConfig("old", command="old-server"),))
    qtbot.addWidget(dialog)
    dialog.servers_changed.connect(changes.append)
    assert dialog.import_json(json.dumps(CLAUDE_STYLE))
    assert [s.name for s in changes[-1]] == ["old", "files", "web"] and dialog.server_list.count() == 3
    assert not dialog.import_json('{"mcpServers": {"bad": {}}}')
    assert "Not imported" in dialog.error_label.text() and len(dialog.servers) == 3 and len(changes) == 1
    dialog.name_edit.setText("calc")
    dialog.command_edit.setText("python '/my tools/calc.py' --fast")
    dialog.approval_combo.setCurrentIndex(1)
    dialog.add_button.click()
    added = changes[-1][-1]
    assert (added.command, added.args, added.approval) == ("python", ("/my tools/calc.py", "--fast"), "allow")
    dialog.name_edit.setText("")
    dialog.add_button.click()
    assert "needs a name" in dialog.error_label.text() and len(changes) == 2


def test_servers_are_kept_in_the_settings_file_and_a_bad_list_falls_back_alone(tmp_path):
    path = tmp_path / "settings.json"
    store = SettingsStore(path)
    servers = tuple(servers_from_json(json.dumps(CLAUDE_STYLE)))
    store.save(AppSettings(mcp_servers=servers, theme="dark"))
    assert SettingsStore(path).load().mcp_servers == servers
    raw = json.loads(path.read_text())
    path.write_text(json.dumps({**raw, "mcp_servers": [{"name": "x"}]}))
    store = SettingsStore(path)
    loaded = store.load()
    assert loaded.mcp_servers == () and loaded.theme == "dark" and "mcp_servers" in store.problems[0]
