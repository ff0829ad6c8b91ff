"""The "serve this model" toggle: a port, the URL to give an editor (with a Copy button), and what is happening.
The toggle stays on across a model change: the server stops before the old model closes and starts again
on the same port with the new one."""

from __future__ import annotations

from PySide6.QtCore import Slot
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (QCheckBox, QFrame, QHBoxLayout, QLabel, QLineEdit, QPushButton, QSpinBox, QVBoxLayout,
                               QWidget)

from app.server_controller import HOST, ServerController

IDLE_TEXT = f"Lets editors and OpenAI clients on this computer ({HOST}) use the loaded model."
NO_MODEL_TEXT = "Load a model to serve it."
PAUSED_TEXT = "Paused while the model changes."


class ServerWidget(QFrame):
    def __init__(self, controller: ServerController, port: int = 8000, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("sidePanel")
        self._controller = controller
        self._has_model = False
        self.toggle = QCheckBox("Serve this model", self)
        self.toggle.setAccessibleName("Serve the loaded model over the OpenAI-compatible API")
        self.port_spin = QSpinBox(self, minimum=0, maximum=65535, value=port)
        self.port_spin.setSpecialValueText("any free")  # shown for 0
        self.port_spin.setAccessibleName("API server port")
        self.url_field = QLineEdit(self, readOnly=True, placeholderText="not serving")
        self.url_field.setAccessibleName("API server URL")
        self.copy_button = QPushButton("Copy", self, enabled=False)
        self.copy_button.setAccessibleName("Copy the API server URL")
        self.state_label = QLabel(NO_MODEL_TEXT, self, objectName="mutedLabel", wordWrap=True)
        self._build_layout()
        self._connect()
        self._show_idle()

    def _build_layout(self) -> None:
        port_row = QHBoxLayout()
        port_row.addWidget(self.toggle, 1)
        port_row.addWidget(QLabel("Port", self))
        port_row.addWidget(self.port_spin)
        url_row = QHBoxLayout()
        url_row.addWidget(self.url_field, 1)
        url_row.addWidget(self.copy_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 10, 12, 10)
        layout.setSpacing(6)
        layout.addWidget(QLabel("OpenAI-compatible API", self, objectName="panelTitle"))
        layout.addLayout(port_row)
        layout.addLayout(url_row)
        layout.addWidget(self.state_label)

    def _connect(self) -> None:
        self.toggle.toggled.connect(self._on_toggle_toggled)
        self.copy_button.clicked.connect(self._on_copy_button_clicked)
        self._controller.started.connect(self._on_controller_started)
        self._controller.stopped.connect(self._on_controller_stopped)
        self._controller.failed.connect(self._on_controller_failed)

    @property
    def port(self) -> int:
        return self.port_spin.value()

    # --- the model's life (from the loader, GUI thread) ---
    def set_model_loading(self) -> None:
        self._has_model = False
        self.toggle.setEnabled(False)
        if self.toggle.isChecked() and not self._controller.is_serving:
            self.state_label.setText(PAUSED_TEXT)

    def set_model_ready(self) -> None:
        """A model serves (a new one, or the old one kept after a refused load): serve it if the toggle is on."""
        self._has_model = True
        if self._controller.is_serving:
            self.toggle.setEnabled(True)
        elif self.toggle.isChecked() and not self._controller.is_starting:
            self._start()
        elif not self._controller.is_starting:
            self._show_idle()

    def set_no_model(self) -> None:
        self._has_model = False
        self._set_checked(False)
        self._show_idle()

    # --- helpers ---
    def _start(self) -> None:
        if self._controller.start(self.port):
            self.toggle.setEnabled(False)
            self.port_spin.setEnabled(False)
            self.state_label.setText("Starting…")
        else:
            self._set_checked(False)
            self._show_idle()

    def _set_checked(self, is_checked: bool) -> None:
        self.toggle.blockSignals(True)
        self.toggle.setChecked(is_checked)
        self.toggle.blockSignals(False)

    def _show_idle(self) -> None:
        """Not serving (and not starting or stopping)."""
        self.toggle.setEnabled(self._has_model)
        self.port_spin.setEnabled(True)
        self.url_field.clear()
        self.copy_button.setEnabled(False)
        self.state_label.setText(IDLE_TEXT if self._has_model else NO_MODEL_TEXT)

    # --- slots ---
    @Slot(bool)
    def _on_toggle_toggled(self, is_checked: bool) -> None:
        if is_checked:
            self._start()
        elif self._controller.is_serving:
            self.toggle.setEnabled(False)
            self.state_label.setText("Stopping…")
            self._controller.stop()

    @Slot()
    def _on_copy_button_clicked(self) -> None:
        QGuiApplication.clipboard().setText(self.url_field.text())

    @Slot(str)
    def _on_controller_started(self, url: str) -> None:
        self.toggle.setEnabled(True)
        self.url_field.setText(url)
        self.copy_button.setEnabled(True)
        self.state_label.setText(f"Serving at {url} to apps on this computer.")

    @Slot()
    def _on_controller_stopped(self) -> None:
        if self.toggle.isChecked() and not self._has_model:  # stopped for a model change; resumes when ready
            self.url_field.clear()
            self.copy_button.setEnabled(False)
            self.state_label.setText(PAUSED_TEXT)
            return
        self._set_checked(False)
        self._show_idle()

    @Slot(str)
    def _on_controller_failed(self, message: str) -> None:
        self._set_checked(False)
        self._show_idle()
