"""Settings → MCP servers: the servers whose tools the model is offered (a command run over stdio, or a
streamable-HTTP URL), each asked before every call or allowed to run without asking; "Import JSON…" reads the
common `{"mcpServers": {...}}` file of other MCP hosts. Shows the tools each server offers, and why none are
offered when the loaded model cannot take them."""

from __future__ import annotations

import shlex
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDialog, QDialogButtonBox, QFileDialog, QFormLayout,
                               QHBoxLayout, QLabel, QLineEdit, QListWidget, QPushButton, QVBoxLayout, QWidget)

from app.mcp.server_config import McpConfigError, McpServerConfig, server_from_entry, servers_from_json

APPROVAL_TEXTS = {"ask": "Ask before each call", "allow": "Run its tools without asking"}


class McpServersDialog(QDialog):
    servers_changed = Signal(tuple)  # tuple[McpServerConfig, ...]

    def __init__(self, servers: tuple[McpServerConfig, ...], parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("MCP servers")
        self.servers = list(servers)
        self.server_list = QListWidget(self, accessibleName="MCP servers")
        self.name_edit = QLineEdit(self, placeholderText="files", accessibleName="Server name")
        self.command_edit = QLineEdit(self, placeholderText="npx -y @modelcontextprotocol/server-filesystem ~/notes",
                                      accessibleName="Command (stdio)")
        self.url_edit = QLineEdit(self, placeholderText="http://localhost:8000/mcp", accessibleName="URL")
        self.approval_combo = QComboBox(self, accessibleName="Approval")
        for key, text in APPROVAL_TEXTS.items():
            self.approval_combo.addItem(text, key)
        self.enabled_check = QCheckBox("Offer its tools", self, checked=True)
        self.add_button = QPushButton("Add or update", self)
        self.remove_button = QPushButton("Remove", self)
        self.import_button = QPushButton("Import JSON…", self)
        self.error_label = QLabel("", self, objectName="errorLabel", wordWrap=True)
        self.tools_label = QLabel("", self, wordWrap=True, accessibleName="Tools offered")
        self._build_layout()
        self._refresh_list()
        self.server_list.currentRowChanged.connect(self._on_server_list_current_row_changed)
        self.add_button.clicked.connect(self._on_add_button_clicked)
        self.remove_button.clicked.connect(self._on_remove_button_clicked)
        self.import_button.clicked.connect(self._on_import_button_clicked)

    def _build_layout(self) -> None:
        form = QFormLayout()
        form.addRow("Name", self.name_edit)
        form.addRow("Command (stdio)", self.command_edit)
        form.addRow("or URL (streamable HTTP)", self.url_edit)
        form.addRow("Approval", self.approval_combo)
        form.addRow("", self.enabled_check)
        buttons = QHBoxLayout()
        for button in (self.add_button, self.remove_button, self.import_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        close = QDialogButtonBox(QDialogButtonBox.StandardButton.Close, self)
        close.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.server_list)
        layout.addLayout(form)
        layout.addLayout(buttons)
        layout.addWidget(self.error_label)
        layout.addWidget(self.tools_label)
        layout.addWidget(close)
        self.resize(620, 480)

    def show_tools(self, text: str) -> None:
        self.tools_label.setText(text)

    def server_from_form(self) -> McpServerConfig:
        """The form as a server; McpConfigError with one line when it is incomplete."""
        command = self.command_edit.text().strip()
        try:
            words = shlex.split(command)
        except ValueError as err:
            raise McpConfigError(f"the command cannot be read: {err}") from None
        entry = {"command": words[0] if words else "", "args": words[1:], "url": self.url_edit.text().strip(),
                 "approval": self.approval_combo.currentData()}
        existing = next((s for s in self.servers if s.name == self.name_edit.text().strip()), None)
        server = server_from_entry(self.name_edit.text(), entry)
        if existing is not None and existing.is_stdio == server.is_stdio:
            server = replace(server, env=existing.env, headers=existing.headers)
        return replace(server, is_enabled=self.enabled_check.isChecked())

    def add_or_update(self, server: McpServerConfig) -> None:
        self._put(server)
        self._changed()

    def _put(self, server: McpServerConfig) -> None:
        names = [s.name for s in self.servers]
        if server.name in names:
            self.servers[names.index(server.name)] = server
        else:
            self.servers.append(server)

    def import_json(self, text: str) -> bool:
        """Add the servers of an `mcpServers` JSON text (replacing those of the same name); False with the reason
        shown when it cannot be read, and then nothing changes."""
        try:
            imported = servers_from_json(text)
        except McpConfigError as err:
            self.error_label.setText(f"Not imported: {err}")
            return False
        for server in imported:
            self._put(server)
        self._changed()
        return True

    def _changed(self) -> None:
        self.error_label.setText("")
        self._refresh_list()
        self.servers_changed.emit(tuple(self.servers))

    def _refresh_list(self) -> None:
        self.server_list.clear()
        for server in self.servers:
            state = "" if server.is_enabled else " (off)"
            self.server_list.addItem(f"{server.name}{state} — {server.describe()} — {APPROVAL_TEXTS[server.approval]}")

    @Slot(int)
    def _on_server_list_current_row_changed(self, row: int) -> None:
        if not 0 <= row < len(self.servers):
            return
        server = self.servers[row]
        self.name_edit.setText(server.name)
        self.command_edit.setText(shlex.join([server.command, *server.args]) if server.is_stdio else "")
        self.url_edit.setText(server.url)
        self.approval_combo.setCurrentIndex(list(APPROVAL_TEXTS).index(server.approval))
        self.enabled_check.setChecked(server.is_enabled)

    @Slot()
    def _on_add_button_clicked(self) -> None:
        try:
            self.add_or_update(self.server_from_form())
        except McpConfigError as err:
            self.error_label.setText(str(err))

    @Slot()
    def _on_remove_button_clicked(self) -> None:
        row = self.server_list.currentRow()
        if 0 <= row < len(self.servers):
            del self.servers[row]
            self._changed()

    @Slot()
    def _on_import_button_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import MCP servers", "", "JSON (*.json);;All files (*)")
        if not path:
            return
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            self.error_label.setText(f"Not imported: {path} cannot be read ({err})")
            return
        self.import_json(text)
