"""More sampling controls, shown under the settings bar when asked for: top-k, min-p, the repetition, presence and
frequency penalties, and the "JSON output" switch with a box for a JSON schema (GUI thread)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QCheckBox, QDoubleSpinBox, QHBoxLayout, QLabel, QPlainTextEdit, QSpinBox, QVBoxLayout,
                               QWidget)

from app.chat.sampling_extras import RANGES, SamplingExtras

SCHEMA_HINT = 'JSON schema the reply must follow, e.g. {"type": "object", "properties": {"name": {"type": "string"}}}' \
              " - empty: any JSON object"


class SamplingExtrasWidget(QWidget):
    changed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.top_k = self._spin(QSpinBox(self), "top_k", 1, "Top-k (0: off)")
        self.min_p = self._spin(QDoubleSpinBox(self), "min_p", 0.01, "Min-p (0: off)")
        self.repetition_penalty = self._spin(QDoubleSpinBox(self), "repetition_penalty", 0.05,
                                             "Repetition penalty (1: off)")
        self.presence_penalty = self._spin(QDoubleSpinBox(self), "presence_penalty", 0.1, "Presence penalty")
        self.frequency_penalty = self._spin(QDoubleSpinBox(self), "frequency_penalty", 0.1, "Frequency penalty")
        self.json_output = QCheckBox("JSON output", self)
        self.json_output.setAccessibleName("Reply in JSON")
        self.json_output.setToolTip("The reply is JSON: any object, or one the schema below accepts")
        self.schema_edit = QPlainTextEdit(self)
        self.schema_edit.setAccessibleName("JSON schema")
        self.schema_edit.setPlaceholderText(SCHEMA_HINT)
        self.schema_edit.setFixedHeight(70)
        self.schema_edit.hide()
        self._build_layout()
        self.set_values(SamplingExtras())
        self.json_output.toggled.connect(self.schema_edit.setVisible)
        self.json_output.toggled.connect(self.changed)
        self.schema_edit.textChanged.connect(self.changed)

    def _spin(self, box, name: str, step: float, label: str):
        low, high = RANGES[name]
        box.setRange(low, high)
        box.setSingleStep(step)
        box.setAccessibleName(label)
        box.setToolTip(label)
        box.valueChanged.connect(self.changed)
        return box

    def _build_layout(self) -> None:
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        for label, box in (("Top-k", self.top_k), ("Min-p", self.min_p), ("Repeat", self.repetition_penalty),
                           ("Presence", self.presence_penalty), ("Frequency", self.frequency_penalty)):
            row.addWidget(QLabel(label, self, objectName="mutedLabel"))
            row.addWidget(box)
        row.addStretch(1)
        row.addWidget(self.json_output)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.schema_edit)

    def set_values(self, extras: SamplingExtras) -> None:
        self.top_k.setValue(extras.top_k)
        self.min_p.setValue(extras.min_p)
        self.repetition_penalty.setValue(extras.repetition_penalty)
        self.presence_penalty.setValue(extras.presence_penalty)
        self.frequency_penalty.setValue(extras.frequency_penalty)
        self.json_output.setChecked(extras.json_output)
        self.schema_edit.setPlainText(extras.json_schema)

    def values(self) -> SamplingExtras:
        return SamplingExtras(self.top_k.value(), self.min_p.value(), self.repetition_penalty.value(),
                              self.presence_penalty.value(), self.frequency_penalty.value(),
                              self.json_output.isChecked(), self.schema_edit.toPlainText())
