"""Add a remote OpenAI-compatible server (vLLM, llama.cpp's server, another Wisp) to the model list: its base URL
and an optional API key. Nothing is contacted here; loading it connects (and says so if it cannot)."""

from __future__ import annotations

from PySide6.QtCore import Slot
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QFormLayout, QLabel, QLineEdit, QVBoxLayout, QWidget

from app.remote_server import URL_EXAMPLE, RemoteServer
from engine.api import is_remote_url


class RemoteServerDialog(QDialog):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Add remote server")
        self.url_field = QLineEdit(self, placeholderText=URL_EXAMPLE)
        self.url_field.setAccessibleName("Server URL")
        self.key_field = QLineEdit(self, placeholderText="optional", echoMode=QLineEdit.EchoMode.Password)
        self.key_field.setAccessibleName("API key")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel,
                                        self)
        self.ok_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.ok_button.setEnabled(False)
        form = QFormLayout()
        form.addRow("URL", self.url_field)
        form.addRow("API key", self.key_field)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("An OpenAI-compatible server, e.g. vLLM, llama.cpp's server or `wisp serve`.", self,
                                wordWrap=True))
        layout.addLayout(form)
        layout.addWidget(QLabel("The key is kept in Wisp's settings file on this computer.", self,
                                objectName="mutedLabel", wordWrap=True))
        layout.addWidget(self.buttons)
        self.url_field.textChanged.connect(self._on_url_field_text_changed)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)

    def server(self) -> RemoteServer:
        return RemoteServer(self.url_field.text().strip(), self.key_field.text().strip() or None)

    @Slot(str)
    def _on_url_field_text_changed(self, text: str) -> None:
        self.ok_button.setEnabled(is_remote_url(text))
