"""Keep a binding that drops references to None from aborting the app.

PySide6-Essentials 6.12.0 on Python 3.11 releases one reference to None on every call of a method that returns
nothing (QPainter.setPen, QWidget.update, QTimer.start, ...). None starts with some 60 000 references and a live
memory panel makes thousands of such calls a second, so the interpreter aborts with "Fatal Python error:
none_dealloc" within minutes, idle or not. Python 3.12 made None immortal; on an affected binding this guard does
the same by lifting None's count out of reach. The pyproject excludes that release, so this only matters where it
is already installed."""

from __future__ import annotations

import ctypes
import logging
import sys

from PySide6.QtCore import QTimer

log = logging.getLogger(__name__)
PROBE_CALLS = 200
LIFT = 1 << 50  # ~10^15 references: some 35 years of calls at a million a second
_state = {"is_lifted": False}


def binding_drops_none() -> bool:
    """Measure it: do void calls into Qt lose references to None? (Never on Python 3.12+: None is immortal.)"""
    if sys.version_info >= (3, 12):
        return False
    timer = QTimer()
    before = sys.getrefcount(None)
    for _ in range(PROBE_CALLS):
        timer.stop()
    return sys.getrefcount(None) <= before - PROBE_CALLS // 2


def guard_none_refcount() -> bool:
    """Call once at start-up (later calls do nothing); True when the running binding needed it."""
    if _state["is_lifted"] or not binding_drops_none():
        return _state["is_lifted"]
    # ob_refcnt is the first field of every object in a release build of CPython 3.11.
    ctypes.c_ssize_t.from_address(id(None)).value += LIFT
    _state["is_lifted"] = True
    import PySide6

    log.warning("PySide6 %s drops a reference to None on every void call on Python %d.%d; None was made "
                "immortal to keep the app alive. Install another PySide6-Essentials release (see the README).",
                PySide6.__version__, *sys.version_info[:2])
    return True
