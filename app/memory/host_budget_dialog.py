"""Model > Host memory for experts…: the most host RAM the engine pins for expert rows (`--host-budget`), or
automatic (the RAM free at load, less a reserve). Rows past it stay memory-mapped in the model file and a miss on
one is read through the page cache, which is slower than a pinned copy."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (QButtonGroup, QDialog, QDialogButtonBox, QDoubleSpinBox, QGridLayout, QLabel,
                               QRadioButton, QVBoxLayout, QWidget)

from app.engine_api import format_bytes

GiB = 1024**3
MINIMUM_GIB = 1.0


class HostBudgetDialog(QDialog):
    chosen = Signal(object)  # the new cap in bytes, or None for automatic; only when it changed

    def __init__(self, current_bytes: int | None, host_total_bytes: int | None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Host memory for experts")
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self._current = current_bytes
        machine = (f"This computer has {format_bytes(host_total_bytes)} of RAM. " if host_total_bytes else "")
        text = QLabel(
            "Wisp keeps the experts that are not on the GPU in host RAM, pinned for fast copies. Experts past this "
            "limit stay in the model file and are read through the operating system's file cache when needed "
            f"(slower). {machine}Automatic uses the RAM free when the model loads, less a reserve for the rest "
            "of the system. A change reloads the model.", self, wordWrap=True)
        self.automatic = QRadioButton("&Automatic", self)
        self.limited = QRadioButton("At &most", self)
        group = QButtonGroup(self)
        group.addButton(self.automatic)
        group.addButton(self.limited)
        self.size = QDoubleSpinBox(self, suffix=" GiB", decimals=1, singleStep=1.0)
        self.size.setAccessibleName("Host memory limit for experts in GiB")
        top = max(MINIMUM_GIB, (host_total_bytes or 1024 * GiB) / GiB)
        self.size.setRange(MINIMUM_GIB, top)
        self.size.setValue(min(top, max(MINIMUM_GIB, (current_bytes or top / 2 * GiB) / GiB)))
        (self.automatic if current_bytes is None else self.limited).setChecked(True)
        self.size.setEnabled(current_bytes is not None)
        self.limited.toggled.connect(self.size.setEnabled)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        grid = QGridLayout()
        grid.addWidget(self.automatic, 0, 0, 1, 2)
        grid.addWidget(self.limited, 1, 0)
        grid.addWidget(self.size, 1, 1)
        layout = QVBoxLayout(self)
        layout.addWidget(text)
        layout.addLayout(grid)
        layout.addWidget(buttons)
        self.accepted.connect(self._on_accepted)

    def value(self) -> int | None:
        """The cap the dialog shows now: bytes (whole MiB), or None for automatic."""
        if self.automatic.isChecked():
            return None
        return int(self.size.value() * 1024) * 1024**2

    @Slot()
    def _on_accepted(self) -> None:
        if self.value() != self._current:
            self.chosen.emit(self.value())
