"""Crashes leave a trace a user can send: faulthandler writes native crashes (segfaults, aborts) of every
thread to crash.log in the log folder, and an uncaught Python exception (on any thread, or in a Qt slot) is
written to the app log and to crash.log and shown in a dialog while the app keeps running.

The app also sends its stderr there: CPython reports a fatal error ("Fatal Python error: ...") on stderr after
switching faulthandler off, and an app started from a desktop menu has no terminal to show it."""

from __future__ import annotations

import faulthandler
import logging
import os
import sys
import threading
import time
import traceback
from pathlib import Path

from PySide6.QtCore import QObject, QUrl, Signal, Slot
from PySide6.QtGui import QDesktopServices
from PySide6.QtWidgets import QApplication, QMessageBox

from app.private_files import open_private

log = logging.getLogger("wisp.crash")
OBJECT_NAME = "crashDialog"
CRASH_LOG = "crash.log"


class CrashHandler(QObject):
    """Created on the GUI thread; `report` may be called from any thread (the dialog opens on the GUI thread)."""

    crashed = Signal(str)  # the formatted traceback; queued to the GUI thread

    def __init__(self, log_dir: Path, parent: QObject | None = None):
        super().__init__(parent)
        self.log_dir = log_dir
        self.crash_log = log_dir / CRASH_LOG
        self.dialog: QMessageBox | None = None
        self._fault_file = None
        self._previous_hooks = (sys.excepthook, threading.excepthook)
        self.crashed.connect(self._on_crashed)

    def install(self, capture_stderr: bool = False) -> "CrashHandler":
        """Start writing crashes to crash.log; with capture_stderr, everything written to stderr (file descriptor
        2: Python, Qt and native libraries alike) goes there too."""
        try:
            # kept open: faulthandler writes to its raw file descriptor
            self._fault_file = open_private(self.crash_log, encoding="utf-8", buffering=1)
        except OSError as err:  # a read-only data folder: crashes go to stderr and the log
            log.warning("cannot write %s (%s); crashes are reported on stderr", self.crash_log, err)
        if self._fault_file is not None:
            faulthandler.enable(self._fault_file, all_threads=True)
            if capture_stderr:
                self._capture_stderr()
        sys.excepthook = self.report
        threading.excepthook = lambda hook_args: self.report(hook_args.exc_type, hook_args.exc_value,
                                                             hook_args.exc_traceback)
        return self

    def _capture_stderr(self) -> None:
        if sys.stderr is not None and sys.stderr.isatty():
            print(f"wisp-desktop: errors are written to {self.crash_log}", file=sys.stderr, flush=True)
        self._fault_file.write(f"--- wisp-desktop started {time.strftime('%Y-%m-%d %H:%M:%S')} "
                               f"(pid {os.getpid()})\n")
        if sys.stderr is not None:
            sys.stderr.flush()
        os.dup2(self._fault_file.fileno(), 2)

    def uninstall(self) -> None:
        sys.excepthook, threading.excepthook = self._previous_hooks
        faulthandler.disable()
        if self._fault_file is not None:
            self._fault_file.close()
            self._fault_file = None

    def report(self, exc_type, exc_value, exc_traceback) -> None:
        """sys.excepthook: log the exception and show it; never raises (a failing hook would hide the error)."""
        if issubclass(exc_type, KeyboardInterrupt):
            sys.__excepthook__(exc_type, exc_value, exc_traceback)
            return
        text = "".join(traceback.format_exception(exc_type, exc_value, exc_traceback))
        try:
            log.critical("uncaught exception\n%s", text)
            try:
                with open_private(self.crash_log, encoding="utf-8") as crash_file:
                    crash_file.write(f"--- uncaught exception\n{text}\n")
            except OSError:
                sys.__excepthook__(exc_type, exc_value, exc_traceback)
            self.crashed.emit(text)
        except Exception:
            sys.__excepthook__(exc_type, exc_value, exc_traceback)

    @Slot(str)
    def _on_crashed(self, text: str) -> None:
        if QApplication.instance() is None:
            return
        if self.dialog is not None:  # one dialog at a time: a burst of errors adds to it
            self.dialog.setDetailedText(self.dialog.detailedText() + "\n" + text)
            return
        self.dialog = crash_dialog(text, self.log_dir)
        self.dialog.finished.connect(self._on_dialog_finished)
        self.dialog.open()

    @Slot()
    def _on_dialog_finished(self) -> None:
        self.dialog.deleteLater()
        self.dialog = None


def crash_dialog(text: str, log_dir: Path) -> QMessageBox:
    summary = text.strip().splitlines()[-1]
    box = QMessageBox(QMessageBox.Icon.Critical, "Wisp hit an unexpected error",
                      f"{summary}\n\nWisp keeps running, but save your work and restart it if something looks wrong. "
                      f"The details are written to the log in {log_dir}.",
                      QMessageBox.StandardButton.Close, QApplication.activeWindow())
    box.setObjectName(OBJECT_NAME)
    box.setDetailedText(text)
    open_logs = box.addButton("Open log folder", QMessageBox.ButtonRole.ActionRole)
    open_logs.clicked.connect(lambda: QDesktopServices.openUrl(QUrl.fromLocalFile(str(log_dir))))
    return box
