"""Pick a model: the bundled demo, the Hugging Face cache, the user's folders and GGUF files, each with
its architecture, experts, size and the memory plan it would get at the current budget (broken ones are listed
with the reason), and the user's remote servers. Scanning runs off the GUI thread."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal, Slot
from PySide6.QtWidgets import (QAbstractItemView, QDialog, QDialogButtonBox, QFileDialog, QHBoxLayout, QHeaderView,
                               QLabel, QPushButton, QTableView, QVBoxLayout, QWidget)

from app.background import run_in_background
from app.engine_api import api
from app.picker.model_fit import REMOTE_FIT, fit_at_budget
from app.picker.model_list_model import ModelListModel, ModelRow
from app.picker.remote_server_dialog import RemoteServerDialog
from app.remote_server import RemoteServer


def scan_rows(folders: tuple[str, ...], budget_bytes: int, servers: tuple[RemoteServer, ...] = (),
              device: str = "auto", loaded: str | None = None, gguf_engine: str = "auto",
              dense_quant: str | None = None) -> list[ModelRow]:
    """Worker thread: every model found, with how it fits the budget, then the remote servers (not contacted).
    `loaded` is the serving model's path or URL (its row is marked); `gguf_engine` the app's GGUF engine choice;
    `dense_quant` its checkpoints' dense weights choice."""
    engine_api = api()
    rows = []
    for entry in engine_api.scan_models(list(folders)):
        is_loaded = loaded is not None and Path(entry.path) == Path(loaded)
        if entry.error:
            rows.append(ModelRow(entry, entry.error, is_loaded=is_loaded))
            continue
        try:
            fit = fit_at_budget(entry, budget_bytes, device, gguf_engine, dense_quant)
            rows.append(ModelRow(entry, fit.text, fit.minimum_bytes, is_loaded))
        except Exception as err:  # an odd config must not hide the other models
            rows.append(ModelRow(entry, f"cannot estimate the memory plan: {err}", is_loaded=is_loaded))
    for server in servers:
        entry = engine_api.ModelEntry(path=server.url, name=server.url, source="remote", model_type="remote")
        rows.append(ModelRow(entry, REMOTE_FIT, is_loaded=server.url == loaded))
    return rows


class ModelPickerDialog(QDialog):
    model_chosen = Signal(object)  # a model path, or None for the bundled demo
    model_chosen_at_minimum = Signal(object, object)  # a model (as model_chosen), the least budget that loads it
    folders_changed = Signal(tuple)
    remote_servers_changed = Signal(tuple)  # of RemoteServer
    scanned = Signal()

    def __init__(self, folders: tuple[str, ...], budget_bytes: int, theme, parent: QWidget | None = None,
                 remote_servers: tuple[RemoteServer, ...] = (), device: str = "auto", loaded: str | None = None,
                 gguf_engine: str = "auto", dense_quant: str | None = None):
        super().__init__(parent)
        self.setWindowTitle("Choose a model")
        self.resize(900, 420)
        self._folders, self._budget = tuple(folders), budget_bytes
        self._servers = tuple(remote_servers)
        self._device, self._loaded, self._gguf_engine, self._dense_quant = device, loaded, gguf_engine, dense_quant
        self._num_scans = 0
        self.model = ModelListModel(api().format_bytes, self)
        self.model.set_error_color(theme.color("danger"))
        self.table = QTableView(self)
        self.table.setModel(self.model)
        self.table.setAccessibleName("Models found")
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().hide()
        self.table.setWordWrap(False)  # one line per model; the full fit is in the tooltip
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)  # the fit is read whole
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)  # a long name is what gives way (elided)
        header.setStretchLastSection(False)
        self.status_label = QLabel("Scanning…", self, objectName="mutedLabel", wordWrap=True)
        self.add_folder_button = QPushButton("Add folder…", self)
        self.add_file_button = QPushButton("Add GGUF file…", self)
        self.add_server_button = QPushButton("Add remote server…", self)
        self.rescan_button = QPushButton("Rescan", self)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.load_button = QPushButton("Load", self, objectName="primaryButton")
        self.load_button.setAccessibleName("Load the selected model")
        self.buttons.addButton(self.load_button, QDialogButtonBox.ButtonRole.AcceptRole)
        self.load_button.setEnabled(False)
        self.minimum_button = QPushButton(self)  # for a model that needs a larger budget than the current one
        self.minimum_button.setAccessibleName("Load the selected model at its minimum budget")
        self.minimum_button.hide()
        self._build_layout()
        self._connect()
        self.rescan()

    def _build_layout(self) -> None:
        actions = QHBoxLayout()
        for button in (self.add_folder_button, self.add_file_button, self.add_server_button, self.rescan_button):
            actions.addWidget(button)
        actions.addStretch(1)
        actions.addWidget(self.minimum_button)
        actions.addWidget(self.buttons)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.status_label)
        layout.addLayout(actions)

    def _connect(self) -> None:
        self.table.selectionModel().selectionChanged.connect(self._on_table_selection_changed)
        self.table.doubleClicked.connect(self._on_buttons_accepted)
        self.buttons.accepted.connect(self._on_buttons_accepted)
        self.buttons.rejected.connect(self.reject)
        self.add_folder_button.clicked.connect(self._on_add_folder_button_clicked)
        self.add_file_button.clicked.connect(self._on_add_file_button_clicked)
        self.add_server_button.clicked.connect(self._on_add_server_button_clicked)
        self.rescan_button.clicked.connect(self.rescan)
        self.minimum_button.clicked.connect(self._on_minimum_button_clicked)

    def rescan(self) -> None:
        """Scan again off the GUI thread; only the newest scan's result is shown."""
        self.status_label.setText("Scanning…")
        self._num_scans += 1
        folders, budget, servers, scan = self._folders, self._budget, self._servers, self._num_scans
        device, loaded, gguf_engine, dense_quant = self._device, self._loaded, self._gguf_engine, self._dense_quant
        run_in_background(lambda report: scan_rows(folders, budget, servers, device, loaded, gguf_engine, dense_quant),
                          on_success=lambda rows: scan == self._num_scans and self._on_scan_task_succeeded(rows),
                          on_failure=lambda error: scan == self._num_scans and self._on_scan_task_failed(error))

    def add_path(self, path: str) -> None:
        if path not in self._folders:
            self._folders += (path,)
            self.folders_changed.emit(self._folders)
        self.rescan()

    def add_remote_server(self, server: RemoteServer) -> None:
        """List a remote server (replacing one with the same URL, so that a new key wins) and remember it."""
        self._servers = tuple(s for s in self._servers if s.url != server.url) + (server,)
        self.remote_servers_changed.emit(self._servers)
        self.rescan()

    def select_row(self, row: int) -> None:
        self.table.selectRow(row)

    def _on_scan_task_succeeded(self, rows: list[ModelRow]) -> None:
        self.model.set_rows(rows)
        num_broken = sum(not row.is_usable for row in rows)
        fit = ("Fit shown once the hardware is known." if self._budget is None
               else f"Fit shown for a budget of {api().format_bytes(self._budget)}.")
        self.status_label.setText(f"{len(rows)} model(s) found, {num_broken} not usable (hover for the reason). {fit}")
        self.scanned.emit()

    def _on_scan_task_failed(self, error: BaseException) -> None:
        self.status_label.setText(f"Scanning failed: {error}")
        self.scanned.emit()

    @Slot()
    def _on_table_selection_changed(self, *_) -> None:
        row = self._selected_row()
        self.load_button.setEnabled(row is not None and row.is_usable)
        minimum = row.minimum_bytes if row is not None and row.is_usable else None
        if minimum is not None:
            self.minimum_button.setText(f"Load at the minimum ({api().format_bytes(minimum)})")
        self.minimum_button.setVisible(minimum is not None)

    def _selected_row(self) -> ModelRow | None:
        rows = self.table.selectionModel().selectedRows()
        return self.model.row(rows[0].row()) if rows else None

    @staticmethod
    def _model_of(row: ModelRow) -> str | None:
        return None if row.entry.source == "demo" else row.entry.path

    @Slot()
    def _on_buttons_accepted(self, *_) -> None:
        row = self._selected_row()
        if row is None or not row.is_usable:
            return
        self.model_chosen.emit(self._model_of(row))
        self.accept()

    @Slot()
    def _on_minimum_button_clicked(self) -> None:
        row = self._selected_row()
        if row is not None and row.minimum_bytes is not None:
            self.model_chosen_at_minimum.emit(self._model_of(row), row.minimum_bytes)
            self.accept()

    @Slot()
    def _on_add_folder_button_clicked(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Add a model folder (or a folder of models)", str(Path.home()))
        if folder:
            self.add_path(folder)

    @Slot()
    def _on_add_file_button_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Add a GGUF file", str(Path.home()), "GGUF (*.gguf)")
        if path:
            self.add_path(path)

    @Slot()
    def _on_add_server_button_clicked(self) -> None:
        dialog = RemoteServerDialog(self)
        dialog.accepted.connect(lambda: self.add_remote_server(dialog.server()))
        dialog.finished.connect(dialog.deleteLater)
        dialog.open()
