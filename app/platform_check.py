"""Why Qt's X11 (xcb) platform plugin would abort the app, found before QApplication starts: Qt prints a few lines
and aborts (exit 134) when there is no display or when a library the plugin links is missing (libxcb-cursor0 on
many desktops). Linux only; other platforms and other Qt platforms (wayland, offscreen) are not checked."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

SELF_TEST_HINT = "`wisp-desktop --self-test` checks Wisp without a screen"
NOT_FOUND = re.compile(r"^\s*(\S+\.so[.\d]*)\s+=>\s+not found", re.M)


def would_use_xcb(env: dict[str, str]) -> bool:
    """Whether Qt picks its xcb plugin: asked for, or the default outside a Wayland session."""
    platform = env.get("QT_QPA_PLATFORM", "").split(":")[0].split(";")[0].strip()
    if platform:
        return platform == "xcb"
    return not (env.get("WAYLAND_DISPLAY") and env.get("XDG_SESSION_TYPE") == "wayland")


def xcb_plugin() -> Path | None:
    import PySide6

    found = sorted(Path(PySide6.__file__).parent.glob("Qt/plugins/platforms/libqxcb.so"))
    return found[0] if found else None


def missing_libraries(plugin: Path) -> list[str]:
    """The shared libraries `plugin` links that the loader cannot find (ldd's "not found"); [] without ldd."""
    ldd = shutil.which("ldd")
    if ldd is None:
        return []
    try:
        listing = subprocess.run([ldd, str(plugin)], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return sorted(set(NOT_FOUND.findall(listing)))


def package_name(library: str) -> str:
    """Debian's package for a library's soname: libxcb-cursor.so.0 -> libxcb-cursor0 (a name ending in a digit
    takes a hyphen: libxkbcommon-x11.so.0 -> libxkbcommon-x11-0)."""
    stem, _, version = library.partition(".so")
    version = version.lstrip(".").split(".")[0]
    return f"{stem}-{version}" if stem[-1].isdigit() and version else f"{stem}{version}"


def platform_problem(env: dict[str, str] | None = None, plugin: Path | None = None) -> str | None:
    """One line saying why the window cannot open here, or None when Qt can try."""
    env = dict(os.environ) if env is None else env
    if not sys.platform.startswith("linux") or not would_use_xcb(env):
        return None
    if not env.get("DISPLAY"):
        return ("wisp-desktop: no display to open a window on (DISPLAY is not set); start it from a desktop session; "
                f"{SELF_TEST_HINT}")
    plugin = plugin or xcb_plugin()
    missing = missing_libraries(plugin) if plugin else []
    if missing:
        packages = " ".join(package_name(library) for library in missing)
        them = "them" if len(missing) > 1 else "it"
        return (f"wisp-desktop: Qt's X11 plugin needs {', '.join(missing)}: install {them} (Debian/Ubuntu: "
                f"sudo apt install {packages}), then start again; {SELF_TEST_HINT}")
    return None
