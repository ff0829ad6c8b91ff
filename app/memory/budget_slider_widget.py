"""The device memory budget: what the machine has, a slider in MiB, and whether a change is pending
(the engine re-plans at its next drained barrier) or was refused."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSlider, QVBoxLayout, QWidget

from app.memory.budget_range import MiB, BudgetRange

DEBOUNCE_MS = 300
REMOTE_TEXT = "The remote server manages its own memory; this budget applies to local models."


class BudgetSliderWidget(QWidget):
    budget_requested = Signal(int)  # bytes

    def __init__(self, format_bytes, parent: QWidget | None = None):
        super().__init__(parent)
        self._format_bytes = format_bytes
        self._has_range = False
        self._is_remote = False
        self.hardware_label = QLabel("Detecting hardware…", self, objectName="mutedLabel", wordWrap=True)
        self.slider = QSlider(Qt.Orientation.Horizontal, self)
        self.slider.setAccessibleName("Device memory budget")
        self.slider.setEnabled(False)
        self.value_label = QLabel("–", self)
        self.value_label.setMinimumWidth(76)
        self.value_label.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.state_label = QLabel("", self, objectName="pendingLabel", wordWrap=True)
        self._debounce = QTimer(self, singleShot=True, interval=DEBOUNCE_MS)
        self._debounce.timeout.connect(self._on_debounce_timeout)
        self._build_layout()
        self.slider.valueChanged.connect(self._on_slider_value_changed)
        self.slider.sliderReleased.connect(self._on_slider_released)

    def _build_layout(self) -> None:
        row = QHBoxLayout()
        row.addWidget(QLabel("Budget", self))
        row.addWidget(self.slider, 1)
        row.addWidget(self.value_label)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.hardware_label)
        layout.addLayout(row)
        layout.addWidget(self.state_label)

    @property
    def budget_bytes(self) -> int:
        return self.slider.value() * MiB

    @property
    def has_range(self) -> bool:
        """The hardware is known, so budget_bytes is a real choice."""
        return self._has_range

    def set_range(self, budget_range: BudgetRange) -> None:
        self.hardware_label.setText(budget_range.description)
        self.slider.blockSignals(True)
        self.slider.setRange(budget_range.minimum // MiB, budget_range.maximum // MiB)
        self.slider.setSingleStep(64)
        self.slider.setPageStep(1024)
        self.slider.blockSignals(False)
        self._has_range = True
        self.slider.setEnabled(not self._is_remote)

    def set_remote(self, is_remote: bool) -> None:
        """A remote engine serves: the slider has nothing to act on, and says so."""
        self._is_remote = is_remote
        self.slider.setEnabled(self._has_range and not is_remote)
        self.set_state(REMOTE_TEXT if is_remote else "")

    def set_budget(self, num_bytes: int) -> None:
        """Show a budget without requesting it (the engine's current one, or a refused change undone)."""
        self._debounce.stop()
        self.slider.blockSignals(True)
        self.slider.setValue(num_bytes // MiB)
        self.slider.blockSignals(False)
        self.value_label.setText(self._format_bytes(num_bytes))

    def request(self, num_bytes: int) -> None:
        """Move the slider and ask for the budget now (keyboard users and tests)."""
        self.set_budget(num_bytes)
        self.budget_requested.emit(self.budget_bytes)

    def set_state(self, text: str, is_error: bool = False) -> None:
        self.state_label.setObjectName("errorLabel" if is_error else "pendingLabel")
        self.state_label.style().unpolish(self.state_label)  # the style sheet picks colours by object name
        self.state_label.style().polish(self.state_label)
        self.state_label.setText(text)

    @Slot(int)
    def _on_slider_value_changed(self, value: int) -> None:
        self.value_label.setText(self._format_bytes(value * MiB))
        if not self.slider.isSliderDown():
            self._debounce.start()

    @Slot()
    def _on_slider_released(self) -> None:
        self._debounce.start(0)

    @Slot()
    def _on_debounce_timeout(self) -> None:
        self.budget_requested.emit(self.budget_bytes)
