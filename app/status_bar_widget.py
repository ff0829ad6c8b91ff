"""The status bar: what is loaded (or loading, with progress), the tokens the next turn sends of the model's
context, and the open chat's policy for a full context."""

from __future__ import annotations

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import QComboBox, QLabel, QProgressBar, QStatusBar, QWidget

from app.chat.context_fit import POLICIES


class StatusBarWidget(QStatusBar):
    policy_chosen = Signal(str)  # a key of app.chat.context_fit.POLICIES

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.model_label = QLabel("Starting…", self)
        self.model_label.setAccessibleName("Model status")
        self.progress = QProgressBar(self)
        self.progress.setRange(0, 1000)
        self.progress.setFixedWidth(180)
        self.progress.setAccessibleName("Model loading progress")
        self.progress.hide()
        self.context_label = QLabel("", self)
        self.context_label.setAccessibleName("Context used")
        self.context_label.setToolTip("Tokens the next turn sends (system prompt and the history this chat keeps) "
                                      "of the model's context")
        self.policy_combo = QComboBox(self)
        for key, text in POLICIES.items():
            self.policy_combo.addItem(f"When full: {text}", key)
        self.policy_combo.setAccessibleName("When the context is full")
        self.policy_combo.setToolTip("What this chat does when it outgrows the model's context")
        self.addWidget(self.model_label, 1)
        self.addWidget(self.progress)
        self.addPermanentWidget(self.context_label)
        self.addPermanentWidget(self.policy_combo)
        self.policy_combo.activated.connect(self._on_policy_combo_activated)

    def show_loading(self, text: str) -> None:
        self.model_label.setText(text)
        self.progress.setValue(0)
        self.progress.show()

    def show_progress(self, fraction: float, text: str) -> None:
        self.progress.setValue(int(fraction * 1000))
        self.progress.setFormat(text)
        self.progress.setToolTip(text)

    def show_model(self, info) -> None:
        self.progress.hide()
        warnings = f" · {'; '.join(info.warnings)}" if info.warnings else ""
        if info.model_type == "remote":
            self.model_label.setText(f"{info.name} · {info.device}{warnings}")
            return
        self.model_label.setText(f"{info.name} · {info.model_type}, {info.num_experts} experts top-{info.top_k}, "
                                 f"{info.num_layers} layers · {info.device} {info.dtype}{warnings}")

    def show_no_model(self, text: str = "No model loaded: choose one with Model → Choose model…") -> None:
        self.progress.hide()
        self.model_label.setText(text)

    def show_context(self, used: int, maximum: int, num_dropped: int = 0) -> None:
        dropped = f" · {num_dropped} earlier message{'s' if num_dropped > 1 else ''} left out" if num_dropped else ""
        self.context_label.setText(f"Context {used:,} / {maximum:,} tokens{dropped}")

    def clear_context(self) -> None:
        self.context_label.setText("")

    def show_policy(self, policy: str) -> None:
        self.policy_combo.setCurrentIndex(max(self.policy_combo.findData(policy), 0))

    @Slot(int)
    def _on_policy_combo_activated(self, index: int) -> None:
        self.policy_chosen.emit(self.policy_combo.itemData(index))
