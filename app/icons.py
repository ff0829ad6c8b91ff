"""Icons from resources/icons by name."""

from __future__ import annotations

from PySide6.QtGui import QIcon

from app.resource_paths import ICONS


def icon(name: str) -> QIcon:
    return QIcon(str(ICONS / f"{name}.svg"))
