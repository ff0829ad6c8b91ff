"""Where Qt's xcb plugin cannot load (no display, or libxcb-cursor0 missing), wisp-desktop says so in one line
that names the package and `--self-test`, and exits 2, instead of Qt's abort (exit 134)."""

from __future__ import annotations

import os
import subprocess
import sys

import app.platform_check as platform_check
from app.platform_check import NOT_FOUND, package_name, platform_problem

LDD = """\tlinux-vdso.so.1 (0x00007ffd)
\tlibxcb-cursor.so.0 => not found
\tlibxkbcommon-x11.so.0 => not found
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)
"""


def test_without_a_display_the_app_says_so_in_one_line_and_exits_2(tmp_path):
    env = {key: value for key, value in os.environ.items() if key not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env.update(QT_QPA_PLATFORM="xcb", PYTHONPATH=os.getcwd())
    done = subprocess.run([sys.executable, "-m", "app.main", "--data-dir", str(tmp_path)], env=env,
                          capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr[-500:]
    assert len(lines) == 1 and "DISPLAY" in lines[0] and "wisp-desktop --self-test" in lines[0]


def test_a_missing_library_is_named_with_its_package(monkeypatch, tmp_path):
    monkeypatch.setattr(platform_check, "missing_libraries", lambda plugin: sorted(NOT_FOUND.findall(LDD)))
    line = platform_problem({"DISPLAY": ":0"}, tmp_path / "libqxcb.so")
    assert "libxcb-cursor.so.0" in line and "sudo apt install libxcb-cursor0 libxkbcommon-x11-0" in line
    assert "wisp-desktop --self-test" in line and "\n" not in line


def test_other_platforms_and_a_wayland_session_are_left_to_qt(monkeypatch):
    monkeypatch.setattr(platform_check, "missing_libraries", lambda plugin: ["libxcb-cursor.so.0"])
    assert platform_problem({"QT_QPA_PLATFORM": "offscreen"}) is None
    assert platform_problem({"WAYLAND_DISPLAY": "wayland-0", "XDG_SESSION_TYPE": "wayland"}) is None
    assert platform_problem({"QT_QPA_PLATFORM": "xcb", "WAYLAND_DISPLAY": "wayland-0", "DISPLAY": ":0"}) is not None


def test_package_names_follow_debian():
    assert package_name("libxcb-cursor.so.0") == "libxcb-cursor0"
    assert package_name("libxcb-icccm.so.4") == "libxcb-icccm4"
    assert package_name("libxkbcommon-x11.so.0") == "libxkbcommon-x11-0"
