"""Light and dark themes: colours from resources/themes/<name>.json fill the .qss template (napari style);
"system" follows the desktop's colour scheme and changes with it."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from string import Template

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

from app.chat.markdown_render import RenderStyle
from app.resource_paths import THEMES


@dataclass(frozen=True)
class Theme:
    name: str
    window: str
    panel: str
    base: str
    text: str
    muted: str
    border: str
    accent: str
    accent_text: str
    danger: str
    user_bubble: str
    assistant_bubble: str
    code_background: str
    inline_code_background: str
    link: str
    selection: str
    pygments_style: str
    segment_dense: str
    segment_experts: str
    segment_experts_free: str
    segment_kv: str
    segment_kv_free: str
    segment_state: str
    segment_workspace: str
    segment_free: str
    chart_line: str
    chart_fill: str

    @property
    def render_style(self) -> RenderStyle:
        return RenderStyle(self.pygments_style, self.code_background, self.inline_code_background, self.muted,
                           self.link)

    def color(self, name: str) -> QColor:
        return QColor(getattr(self, name))


def load_theme(name: str) -> Theme:
    values = json.loads((THEMES / f"{name}.json").read_text(encoding="utf-8"))
    return Theme(**{f.name: values[f.name] for f in fields(Theme)})


def system_scheme() -> str:
    scheme = QGuiApplication.styleHints().colorScheme()
    return "dark" if scheme == Qt.ColorScheme.Dark else "light"


def resolve_theme(setting: str) -> Theme:
    """setting: "system" | "light" | "dark"."""
    return load_theme(system_scheme() if setting == "system" else setting)


def style_sheet(theme: Theme) -> str:
    template = Template((THEMES / "wisp.qss").read_text(encoding="utf-8"))
    return template.substitute({f.name: getattr(theme, f.name) for f in fields(Theme)})


def palette(theme: Theme) -> QPalette:
    result = QPalette()
    roles = {QPalette.ColorRole.Window: theme.window, QPalette.ColorRole.WindowText: theme.text,
             QPalette.ColorRole.Base: theme.base, QPalette.ColorRole.AlternateBase: theme.panel,
             QPalette.ColorRole.Text: theme.text, QPalette.ColorRole.Button: theme.panel,
             QPalette.ColorRole.ButtonText: theme.text, QPalette.ColorRole.Highlight: theme.selection,
             QPalette.ColorRole.HighlightedText: theme.text, QPalette.ColorRole.Link: theme.link,
             QPalette.ColorRole.PlaceholderText: theme.muted, QPalette.ColorRole.ToolTipBase: theme.panel,
             QPalette.ColorRole.ToolTipText: theme.text}
    for role, color in roles.items():
        result.setColor(role, QColor(color))
    return result


def apply_theme(theme: Theme) -> None:
    application = QApplication.instance()
    application.setPalette(palette(theme))
    application.setStyleSheet(style_sheet(theme))
