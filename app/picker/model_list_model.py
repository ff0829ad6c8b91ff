"""Found models as a table: a thin adapter over engine.api.ModelEntry plus the fit at the current budget.
Unusable entries stay listed, with the reason."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt
from PySide6.QtGui import QColor, QFont

COLUMNS = ("Model", "Source", "Architecture", "Experts", "Size", "At this budget")
SOURCES = {"demo": "bundled demo", "hf-cache": "Hugging Face cache", "folder": "folder", "gguf": "GGUF file",
           "remote": "remote server"}
LOADED_MARK = " (loaded)"
IMAGES_MARK = " · sees images"


@dataclass(frozen=True)
class ModelRow:
    entry: object  # engine.api.ModelEntry
    fit: str  # app.picker.model_fit.Fit's text, or the entry's error
    minimum_bytes: int | None = None  # the budget is too small: the least that loads it
    is_loaded: bool = False

    @property
    def is_usable(self) -> bool:
        """Loadable: a model that needs a larger budget is (at its minimum), a broken one is not."""
        return self.entry.error is None


class ModelListModel(QAbstractTableModel):
    def __init__(self, format_bytes, parent=None):
        super().__init__(parent)
        self._format_bytes = format_bytes
        self._rows: list[ModelRow] = []
        self._error_color = QColor("#cf222e")

    def set_error_color(self, color: QColor) -> None:
        self._error_color = color

    def set_rows(self, rows: list[ModelRow]) -> None:
        self.beginResetModel()
        self._rows = list(rows)
        self.endResetModel()

    def row(self, row: int) -> ModelRow:
        return self._rows[row]

    @property
    def rows(self) -> list[ModelRow]:
        return list(self._rows)

    def rowCount(self, parent: QModelIndex = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent: QModelIndex = QModelIndex()) -> int:
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation, role: int = Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return COLUMNS[section]
        return None

    def data(self, index: QModelIndex, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        row = self._rows[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return self._cell(row, index.column())
        if role == Qt.ItemDataRole.ToolTipRole:
            return row.entry.error or f"{row.entry.path}{vision_text(row.entry)}\n{row.fit}"
        if role == Qt.ItemDataRole.ForegroundRole and not row.is_usable:
            return self._error_color
        if role == Qt.ItemDataRole.FontRole and row.is_loaded:
            font = QFont()
            font.setBold(True)
            return font
        return None

    def _cell(self, row: ModelRow, column: int) -> str:
        entry = row.entry
        if column == 0:
            return entry.name + (LOADED_MARK if row.is_loaded else "")
        if column == 1:
            return SOURCES.get(entry.source, entry.source)
        if column == 2:
            return (entry.model_type or "–") + (IMAGES_MARK if entry.sees_images else "")
        if column == 3:
            return experts_text(entry)
        if column == 4:
            return self._format_bytes(entry.size_bytes) if entry.size_bytes else "–"
        return row.fit


def vision_text(entry) -> str:
    """The tooltip's line for a GGUF file's paired vision tower."""
    return f"\nvision tower: {entry.mmproj}" if entry.mmproj else ""


def experts_text(entry) -> str:
    """Routed experts and top-k, shared experts (always resident), layers."""
    if not entry.num_experts:
        return "–"
    shared = f" + {entry.num_shared_experts} shared" if entry.num_shared_experts else ""
    return f"{entry.num_experts} × top-{entry.top_k}{shared}, {entry.num_layers} layers"
