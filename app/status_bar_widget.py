"""The status bar: what is loaded (or loading, with progress), context used of the maximum, last reply speed."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QProgressBar, QStatusBar, QWidget


class StatusBarWidget(QStatusBar):
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
        self.addWidget(self.model_label, 1)
        self.addWidget(self.progress)
        self.addPermanentWidget(self.context_label)

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

    def show_context(self, used: int, maximum: int) -> None:
        self.context_label.setText(f"Context {used:,} / {maximum:,} tokens")
