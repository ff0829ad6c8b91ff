"""The welcome dialog of the first run: what Wisp found on this computer (hardware, models), the budget and
plan it recommends, and a plain statement that nothing leaves the machine. Detection runs off the GUI thread;
the dialog opens at once with placeholders."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QDialog, QFormLayout, QFrame, QHBoxLayout, QHeaderView,
                               QLabel, QPushButton, QScrollArea, QTableView, QVBoxLayout, QWidget)

from app.app_paths import AppPaths
from app.background import run_in_background
from app.engine_api import format_bytes
from app.first_run.welcome_facts import WelcomeFacts, gather_facts, hardware_lines
from app.icons import icon
from app.picker.model_list_model import ModelListModel

OBJECT_NAME = "welcomeDialog"
MAX_VISIBLE_MODELS = 6
PRIVACY = ("<b>Nothing leaves this computer.</b> Wisp runs models here, on your own hardware. It has no telemetry, "
           "no usage statistics and no automatic crash reports, and it never downloads models or checks for "
           "updates. It uses the network only when you ask it to: for a remote server you add as a model, or for "
           "the local API server you switch on.")
MODELS_HINT = "Add model folders or GGUF files any time with Model → Choose model (Ctrl+M)."
BUDGET_HINT = "Wisp starts with this budget; the slider in the memory panel changes it at any time."


def _section(title: str, parent: QWidget) -> QLabel:
    return QLabel(title, parent, objectName="panelTitle")


def _text(text: str, parent: QWidget, object_name: str = "") -> QLabel:
    label = QLabel(text, parent, wordWrap=True, objectName=object_name)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    return label


class WelcomeDialog(QDialog):
    facts_shown = Signal(object)  # WelcomeFacts, once the detected facts are on screen
    choose_model_requested = Signal()
    model_chosen = Signal(object)  # the recommended model's path, when the user asks to load it

    def __init__(self, paths: AppPaths, theme, model_folders: tuple[str, ...] = (), parent: QWidget | None = None,
                 gguf_engine: str = "auto"):
        super().__init__(parent)
        self.setObjectName(OBJECT_NAME)
        self.setWindowTitle("Welcome to Wisp")
        self.resize(840, 580)
        self.facts: WelcomeFacts | None = None
        self.hardware_form = QFormLayout()
        self.hardware_form.addRow("GPU", _text("Detecting…", self, "mutedLabel"))
        self.models = ModelListModel(format_bytes, self)
        self.models.set_error_color(theme.color("danger"))
        self.models_table = self._build_models_table()
        self.budget_label = _text("…", self)
        self.model_label = _text("…", self)
        self.plan_label = _text("…", self)
        self.privacy_label = _text(PRIVACY, self)
        self.folders_label = _text(self._folders_text(paths), self, "mutedLabel")
        self.models_hint = _text(MODELS_HINT, self, "mutedLabel")
        self.choose_button = QPushButton("Choose another model…", self, autoDefault=False)  # Return: Start
        self.load_button = QPushButton(self, autoDefault=False)
        self.load_button.hide()
        self.start_button = QPushButton("Start", self, objectName="primaryButton", default=True)
        self._build_layout()
        self._fit_models_table()
        self.choose_button.clicked.connect(self._on_choose_button_clicked)
        self.load_button.clicked.connect(self._on_load_button_clicked)
        self.start_button.clicked.connect(self.accept)
        run_in_background(lambda report: gather_facts(tuple(model_folders), gguf_engine), on_success=self.show_facts,
                          on_failure=self._on_facts_task_failed)

    def _build_models_table(self) -> QTableView:
        table = QTableView(self)
        table.setModel(self.models)
        table.setAccessibleName("Models found")
        table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        table.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        table.verticalHeader().hide()
        table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        table.horizontalHeader().setStretchLastSection(True)
        return table

    def _build_layout(self) -> None:
        recommended = QFormLayout()
        recommended.addRow("Budget", self.budget_label)
        recommended.addRow("Model", self.model_label)
        recommended.addRow("Plan", self.plan_label)
        buttons = QHBoxLayout()
        buttons.addWidget(self.choose_button)
        buttons.addStretch(1)
        buttons.addWidget(self.load_button)
        buttons.addWidget(self.start_button)
        sections = (("This computer", [self.hardware_form]),
                    ("Models found", [self.models_table, self.models_hint]),
                    ("Recommended start", [recommended]),
                    ("Your privacy", [self.privacy_label, self.folders_label]))
        content = QWidget(self)
        column = QVBoxLayout(content)
        column.setSpacing(8)
        column.addLayout(self._build_header())
        for title, parts in sections:
            column.addSpacing(6)
            column.addWidget(_section(title, self))
            for part in parts:
                if isinstance(part, QFormLayout):
                    column.addLayout(part)
                else:
                    column.addWidget(part)
        column.addStretch(1)
        # In a scroll area the sections keep their natural heights on a small screen instead of being squeezed
        # over each other; the buttons stay in view below.
        self.scroll_area = QScrollArea(self, widgetResizable=True, frameShape=QFrame.Shape.NoFrame)
        self.scroll_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroll_area.setWidget(content)
        layout = QVBoxLayout(self)
        layout.addWidget(self.scroll_area, 1)
        layout.addLayout(buttons)

    def _build_header(self) -> QHBoxLayout:
        logo = QLabel(self)
        logo.setPixmap(icon("wisp").pixmap(56, 56))
        title = QLabel("Welcome to Wisp", self)
        title.setStyleSheet("font-size: 18pt; font-weight: bold;")
        subtitle = _text("Mixture-of-Experts language models on the computer you already own: Wisp keeps the "
                         "experts a conversation uses in fast memory and gives the rest to the context.", self,
                         "mutedLabel")
        text = QVBoxLayout()
        text.addWidget(title)
        text.addWidget(subtitle)
        header = QHBoxLayout()
        header.addWidget(logo, 0, Qt.AlignmentFlag.AlignTop)
        header.addLayout(text, 1)
        return header

    @staticmethod
    def _folders_text(paths: AppPaths) -> str:
        home = str(Path.home())
        folders = dict.fromkeys(str(folder).replace(home, "~", 1) if str(folder).startswith(home) else str(folder)
                                for folder in (paths.data_dir, paths.config_dir, paths.log_dir))
        return "Your conversations, settings and logs stay on this computer, in " + ", ".join(folders) + "."

    def show_facts(self, facts: WelcomeFacts) -> None:
        """GUI thread: fill the dialog with what the worker found."""
        self.facts = facts
        while self.hardware_form.rowCount():
            self.hardware_form.removeRow(0)
        for label, text in hardware_lines(facts.hardware, format_bytes):
            self.hardware_form.addRow(label, _text(text, self))
        self.models.set_rows(list(facts.rows))
        self._fit_models_table()
        self.budget_label.setText(f"{format_bytes(facts.budget.default)}. {BUDGET_HINT}")
        self._show_recommendation(facts)
        self.facts_shown.emit(facts)

    def _fit_models_table(self) -> None:
        """As tall as its rows (up to MAX_VISIBLE_MODELS, then it scrolls): no empty box under one model."""
        table = self.models_table
        num_rows = max(1, min(self.models.rowCount(), MAX_VISIBLE_MODELS))
        rows_height = sum(table.rowHeight(row) for row in range(num_rows)) or table.verticalHeader().defaultSectionSize()
        table.setFixedHeight(table.horizontalHeader().sizeHint().height() + rows_height + 2 * table.frameWidth() + 2)

    def _show_recommendation(self, facts: WelcomeFacts) -> None:
        recommendation = facts.recommendation
        if recommendation is None:
            self.model_label.setText("No usable model was found; add one with “Choose another model…”.")
            self.plan_label.setText("–")
            return
        entry = recommendation.row.entry
        self.model_label.setText(entry.name if recommendation.is_demo else f"{entry.name} ({entry.path})")
        self.plan_label.setText(recommendation.plan_text)
        if not recommendation.is_demo:
            self.load_button.setText(f"Load {entry.name}")
            self.load_button.show()

    def _on_facts_task_failed(self, error: BaseException) -> None:
        while self.hardware_form.rowCount():
            self.hardware_form.removeRow(0)
        message = f"Could not detect the hardware: {type(error).__name__}: {error}"
        self.hardware_form.addRow("", _text(message, self, "errorLabel"))

    def _on_choose_button_clicked(self) -> None:
        self.accept()
        self.choose_model_requested.emit()

    def _on_load_button_clicked(self) -> None:
        self.accept()
        self.model_chosen.emit(self.facts.recommendation.row.entry.path)


def open_welcome(window) -> WelcomeDialog:
    """Open the welcome dialog over the main window (window-modal, not blocking) and wire its buttons."""
    dialog = WelcomeDialog(window.paths, window.theme, window.settings.model_folders, window,
                           gguf_engine=window.settings.gguf_engine)
    dialog.choose_model_requested.connect(window.open_model_picker)
    dialog.model_chosen.connect(window.load_model)
    dialog.open()  # kept (hidden) after it closes: its detection task may still report to it
    return dialog
