"""The device memory budget: what the machine has, a slider on a logarithmic scale, a box to type an exact size,
marks for the loaded model's minimum and all-resident sizes, and the state of a change (pending until the engine
re-plans at its next drained barrier, or refused, said inline). Budgets are Python ints and travel as `object`
signals: Qt's `int` is 32-bit and a GPU's budget is not."""

from __future__ import annotations

from PySide6.QtCore import Qt, QTimer, Signal, Slot
from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QLabel, QLineEdit, QPushButton, QSlider, QVBoxLayout, QWidget

from app.memory.budget_marks_widget import BudgetMarksWidget
from app.memory.budget_range import BudgetRange
from app.memory.budget_scale import STEPS, bytes_at, position_of

DEBOUNCE_MS = 300
REMOTE_TEXT = "The remote server manages its own memory; this budget applies to local models."
NOT_APPLICABLE_TEXT = "llama.cpp places this model itself; the budget applies to Wisp's own engine."


def typed_size(text: str) -> str:
    """What the size box means: a bare number below 1024 is GiB ("6", "1.5"); a larger one is a byte count, as
    `--budget` reads it; anything with a unit is read as written."""
    try:
        return f"{text} GiB" if float(text) < 1024 else text
    except ValueError:
        return text


class BudgetSliderWidget(QWidget):
    budget_requested = Signal(object)  # bytes (a Python int)
    load_at_minimum_requested = Signal(object)  # bytes: load the refused model at its minimum budget

    def __init__(self, format_bytes, parse_size=None, parent: QWidget | None = None):
        super().__init__(parent)
        self._format_bytes, self._parse_size = format_bytes, parse_size
        self._range: BudgetRange | None = None
        self._budget: int | None = None
        self._is_applicable = True
        self._minimum_offer: int | None = None
        self._model_minimum: int | None = None  # the loaded model's least budget (its marks), when known
        self.hardware_label = QLabel("Detecting hardware…", self, objectName="mutedLabel", wordWrap=True)
        self.slider = QSlider(Qt.Orientation.Horizontal, self)
        self.slider.setAccessibleName("Device memory budget")
        self.slider.setRange(0, STEPS)
        self.slider.setSingleStep(5)
        self.slider.setPageStep(50)
        self.slider.setEnabled(False)
        self.size_edit = QLineEdit(self, placeholderText="e.g. 6 GiB")
        self.size_edit.setAccessibleName("Budget size")
        self.size_edit.setToolTip("Type a size (6.5 GiB, 900 MiB, or a number of GiB) and press Enter")
        self.size_edit.setFixedWidth(92)
        self.size_edit.setEnabled(False)
        self.marks = BudgetMarksWidget(self.slider, self)
        self.state_label = QLabel("", self, objectName="pendingLabel", wordWrap=True)
        self.offer_button = QPushButton(self)
        self.offer_button.hide()
        self._debounce = QTimer(self, singleShot=True, interval=DEBOUNCE_MS)
        self._debounce.timeout.connect(self._on_debounce_timeout)
        self._build_layout()
        self.slider.valueChanged.connect(self._on_slider_value_changed)
        self.slider.sliderReleased.connect(self._on_slider_released)
        self.size_edit.returnPressed.connect(self._on_size_edit_return_pressed)
        self.marks.mark_clicked.connect(self.request)
        self.offer_button.clicked.connect(self._on_offer_button_clicked)

    def _build_layout(self) -> None:
        grid = QGridLayout()
        grid.setContentsMargins(0, 0, 0, 0)
        grid.setVerticalSpacing(0)
        grid.addWidget(QLabel("Budget", self), 0, 0)
        grid.addWidget(self.slider, 0, 1)
        grid.addWidget(self.size_edit, 0, 2)
        grid.addWidget(self.marks, 1, 0, 1, 3)  # ticks line up with the slider, the links take the full width
        grid.setColumnStretch(1, 1)
        offer = QHBoxLayout()
        offer.addWidget(self.offer_button)
        offer.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.hardware_label)
        layout.addLayout(grid)
        layout.addWidget(self.state_label)
        layout.addLayout(offer)

    @property
    def budget_bytes(self) -> int | None:
        return self._budget

    @property
    def has_range(self) -> bool:
        """The hardware is known, so budget_bytes is a real choice."""
        return self._range is not None

    def set_range(self, budget_range: BudgetRange) -> None:
        self.hardware_label.setText(budget_range.description)
        self._range = budget_range
        self._update_enabled()
        if self._budget is not None:
            self.set_budget(self._budget)

    def set_marks(self, marks) -> None:
        """The loaded model's engine.api.BudgetMarks, or None (no model, or one the budget does not apply to)."""
        self._model_minimum = None if marks is None else marks.minimum
        if marks is None or self._range is None:
            self.marks.set_marks([])
            return
        self.marks.set_marks([(self._position(num_bytes), num_bytes, f"{label} {self._format_bytes(num_bytes)}")
                              for label, num_bytes in (("minimum", marks.minimum),
                                                       ("all resident", marks.all_resident))])

    def set_remote(self, is_remote: bool, is_applicable: bool = True) -> None:
        """A remote engine (or llama.cpp) serves: the slider has nothing to act on, and says so."""
        self._is_applicable = is_applicable and not is_remote
        self._update_enabled()
        self.set_state(REMOTE_TEXT if is_remote else "" if is_applicable else NOT_APPLICABLE_TEXT)

    def _update_enabled(self) -> None:
        enabled = self._range is not None and self._is_applicable
        self.slider.setEnabled(enabled)
        self.size_edit.setEnabled(enabled)

    def set_budget(self, num_bytes: int) -> None:
        """Show a budget without requesting it (the engine's current one, or a refused change undone)."""
        self._debounce.stop()
        self._budget = int(num_bytes)
        self.slider.blockSignals(True)
        self.slider.setValue(self._position(num_bytes))
        self.slider.blockSignals(False)
        self.size_edit.setText(self._format_bytes(num_bytes))

    def request(self, num_bytes: int) -> None:
        """Show a budget and ask for it now (marks, the typed size, keyboard users and tests)."""
        self.set_budget(num_bytes)
        self.budget_requested.emit(self._budget)

    def set_state(self, text: str, is_error: bool = False) -> None:
        self.state_label.setObjectName("errorLabel" if is_error else "pendingLabel")
        self.state_label.style().unpolish(self.state_label)  # the style sheet picks colours by object name
        self.state_label.style().polish(self.state_label)
        self.state_label.setText(text)
        if not is_error:
            self.offer_minimum(None)

    def offer_minimum(self, num_bytes: int | None) -> None:
        """Offer to load the model that was just refused at its minimum budget (None: withdraw the offer)."""
        self._minimum_offer = num_bytes
        if num_bytes is not None:
            self.offer_button.setText(f"Load at the minimum ({self._format_bytes(num_bytes)})")
        self.offer_button.setVisible(num_bytes is not None)

    def _position(self, num_bytes: int) -> int:
        if self._range is None:
            return 0
        return position_of(num_bytes, self._range.minimum, self._range.maximum)

    @Slot(int)
    def _on_slider_value_changed(self, position: int) -> None:
        if self._range is None:
            return
        self._budget = bytes_at(position, self._range.minimum, self._range.maximum)
        self.size_edit.setText(self._format_bytes(self._budget))
        if not self.slider.isSliderDown():
            self._debounce.start()

    @Slot()
    def _on_slider_released(self) -> None:
        self._debounce.stop()
        self.budget_requested.emit(self._budget)

    @Slot()
    def _on_debounce_timeout(self) -> None:
        self.budget_requested.emit(self._budget)

    @Slot()
    def _on_size_edit_return_pressed(self) -> None:
        text = self.size_edit.text().strip()
        try:
            num_bytes = self._parse_size(typed_size(text))
        except Exception:
            self.set_state(f"“{text}” is not a size: type one such as 6 GiB or 900 MiB.", is_error=True)
            return
        if self._range is not None and not self._range.minimum <= num_bytes <= self._range.maximum:
            self.set_state(f"Type a size from {self._format_bytes(self._range.minimum)} to "
                           f"{self._format_bytes(self._range.maximum)}.", is_error=True)
            return
        if self._range is not None and self._model_minimum is not None and num_bytes < self._model_minimum:
            self.set_state(f"Type a size from {self._format_bytes(self._model_minimum)} (this model's minimum) to "
                           f"{self._format_bytes(self._range.maximum)}.", is_error=True)
            return
        self.request(num_bytes)

    @Slot()
    def _on_offer_button_clicked(self) -> None:
        if self._minimum_offer is not None:
            self.load_at_minimum_requested.emit(self._minimum_offer)
