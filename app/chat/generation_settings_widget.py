"""System prompt (with presets) and sampling controls: temperature, top-p, max tokens, and for reasoning models
whose chat template takes them, the reasoning effort (gpt-oss) or the thinking switch (Qwen3); "⋯" shows the
rest of the sampling settings and the JSON output switch (SamplingExtrasWidget)."""

from __future__ import annotations

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDoubleSpinBox, QHBoxLayout, QLabel, QPlainTextEdit, QSpinBox,
                               QToolButton, QVBoxLayout, QWidget)

from app.chat.generation_controller import GenerationSettings
from app.chat.prompt_presets import load_presets, preset_for_mode
from app.chat.sampling_extras_widget import SamplingExtrasWidget
from app.engine_api import REASONING_EFFORTS

CUSTOM = "Custom"


class GenerationSettingsWidget(QWidget):
    changed = Signal()  # a sampling value changed (for the settings file)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._presets = load_presets()
        self._mode = "chat"
        self.prompt_toggle = QToolButton(self, text="System prompt", checkable=True)
        self.prompt_toggle.setAccessibleName("Show the system prompt")
        self.preset_combo = QComboBox(self)
        self.preset_combo.setAccessibleName("System prompt preset")
        self.preset_combo.addItems([preset.title for preset in self._presets.values()] + [CUSTOM])
        self.prompt_edit = QPlainTextEdit(self)
        self.prompt_edit.setAccessibleName("System prompt")
        self.prompt_edit.setFixedHeight(90)
        self.prompt_edit.hide()
        self.temperature = self._spin(QDoubleSpinBox(self), 0.0, 2.0, 0.05, "Temperature")
        self.top_p = self._spin(QDoubleSpinBox(self), 0.05, 1.0, 0.05, "Top-p")
        self.max_tokens = self._spin(QSpinBox(self), 1, 32768, 64, "Maximum new tokens")
        self.reasoning_label = QLabel("Reasoning", self, objectName="mutedLabel")
        self.reasoning = QComboBox(self)
        self.reasoning.setAccessibleName("Reasoning effort")
        self.reasoning.setToolTip("How long the model thinks before it answers (its chat template's reasoning effort)")
        self.reasoning.addItem("Default", None)
        for effort in REASONING_EFFORTS:
            self.reasoning.addItem(effort.capitalize(), effort)
        self.thinking = QCheckBox("Think", self, checked=True)
        self.thinking.setAccessibleName("Think before answering")
        self.thinking.setToolTip("Let the model reason before it answers; off, it answers at once "
                                 "(the chat template's enable_thinking)")
        self.set_reasoning_available(False)
        self.more_toggle = QToolButton(self, text="⋯", checkable=True)  # narrow: the row sets the window's width
        self.more_toggle.setAccessibleName("More sampling settings and JSON output")
        self.more_toggle.setToolTip("More sampling settings (top-k, min-p, penalties) and JSON output")
        self.extras = SamplingExtrasWidget(self)
        self.extras.hide()
        self._build_layout()
        self.more_toggle.toggled.connect(self.extras.setVisible)
        self.extras.changed.connect(self.changed)
        self.prompt_toggle.toggled.connect(self.prompt_edit.setVisible)
        self.preset_combo.activated.connect(self._on_preset_combo_activated)
        self.prompt_edit.textChanged.connect(self._on_prompt_edit_text_changed)
        for box in (self.temperature, self.top_p, self.max_tokens):
            box.valueChanged.connect(self.changed)
        self.reasoning.currentIndexChanged.connect(self.changed)
        self.thinking.toggled.connect(self.changed)
        self.set_mode("chat")

    @staticmethod
    def _spin(box, minimum, maximum, step, name):
        box.setRange(minimum, maximum)
        box.setSingleStep(step)
        box.setAccessibleName(name)
        box.setToolTip(name)
        return box

    def _build_layout(self) -> None:
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.prompt_toggle)
        row.addWidget(self.preset_combo)
        row.addStretch(1)
        for label, box in (("Temperature", self.temperature), ("Top-p", self.top_p), ("Max tokens", self.max_tokens)):
            row.addWidget(QLabel(label, self, objectName="mutedLabel"))
            row.addWidget(box)
        row.addWidget(self.reasoning_label)
        row.addWidget(self.reasoning)
        row.addWidget(self.thinking)
        row.addWidget(self.more_toggle)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(row)
        layout.addWidget(self.extras)
        layout.addWidget(self.prompt_edit)

    def set_sampling(self, temperature: float, top_p: float, max_tokens: int) -> None:
        self.temperature.setValue(temperature)
        self.top_p.setValue(top_p)
        self.max_tokens.setValue(max_tokens)

    def set_reasoning_effort(self, effort: str | None) -> None:
        index = self.reasoning.findData(effort)
        self.reasoning.setCurrentIndex(max(index, 0))

    def set_reasoning_available(self, available: bool, thinking_switch: bool = False) -> None:
        """The reasoning effort shows for a model whose chat template takes one, the Think switch for one whose
        template switches thinking; the choices are kept while hidden."""
        self._reasoning_available, self._thinking_available = available, thinking_switch
        self.reasoning_label.setVisible(available)
        self.reasoning.setVisible(available)
        self.thinking.setVisible(thinking_switch)

    def chosen_reasoning_effort(self) -> str | None:
        """The user's choice, kept in the settings file whichever model is loaded."""
        return self.reasoning.currentData()

    def set_mode(self, mode: str) -> None:
        """Switch to the mode's preset, unless the user wrote their own prompt."""
        self._mode = mode
        if self.preset_combo.currentText() != CUSTOM or not self.prompt_edit.toPlainText().strip():
            preset = preset_for_mode(mode, self._presets)
            if preset is not None:
                self._show_prompt(preset.prompt)

    def set_system_prompt(self, text: str) -> None:
        """Show a conversation's own system prompt."""
        self._show_prompt(text)

    def settings(self) -> GenerationSettings:
        effort = self.chosen_reasoning_effort() if self._reasoning_available else None
        thinking = None if not self._thinking_available or self.thinking.isChecked() else False
        return GenerationSettings(self._mode, self.prompt_edit.toPlainText(), self.temperature.value(),
                                  self.top_p.value(), self.max_tokens.value(), effort, thinking, self.extras.values())

    def _show_prompt(self, text: str) -> None:
        self.prompt_edit.blockSignals(True)
        self.prompt_edit.setPlainText(text)
        self.prompt_edit.blockSignals(False)
        self._select_matching_preset()

    def _select_matching_preset(self) -> None:
        text = self.prompt_edit.toPlainText().strip()
        titles = [preset.title for preset in self._presets.values() if preset.prompt.strip() == text]
        self.preset_combo.setCurrentText(titles[0] if titles else CUSTOM)

    @Slot(int)
    def _on_preset_combo_activated(self, index: int) -> None:
        presets = list(self._presets.values())
        if index < len(presets):
            self._show_prompt(presets[index].prompt)

    @Slot()
    def _on_prompt_edit_text_changed(self) -> None:
        self._select_matching_preset()
