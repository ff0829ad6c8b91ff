"""A rotating log file for the app and the engine, plus Qt's own warnings routed into it."""

from __future__ import annotations

import logging
from logging.handlers import RotatingFileHandler
from pathlib import Path

from PySide6.QtCore import QtMsgType, qInstallMessageHandler

from app.private_files import owner_only_opener, private_folder

_handler: RotatingFileHandler | None = None
QT_LEVELS = {QtMsgType.QtDebugMsg: logging.DEBUG, QtMsgType.QtInfoMsg: logging.INFO,
             QtMsgType.QtWarningMsg: logging.WARNING, QtMsgType.QtCriticalMsg: logging.ERROR,
             QtMsgType.QtFatalMsg: logging.CRITICAL}


def _log_qt_message(kind, context, message) -> None:
    logging.getLogger("qt").log(QT_LEVELS.get(kind, logging.WARNING), message)


class PrivateRotatingFileHandler(RotatingFileHandler):
    """Its log file and each one it rotates to are 0600 (the folder is made 0700 by setup_logging)."""

    def _open(self):
        return open(self.baseFilename, self.mode, encoding=self.encoding, errors=self.errors,
                    opener=owner_only_opener)


def setup_logging(log_file: Path) -> None:
    """Log INFO and above to `log_file` (1 MiB, 3 backups), owner-only. Calling it again moves the log to the
    new file."""
    global _handler
    root = logging.getLogger()
    if _handler is not None:
        root.removeHandler(_handler)
        _handler.close()
    try:
        private_folder(log_file.parent)
        _handler = PrivateRotatingFileHandler(log_file, maxBytes=1024 * 1024, backupCount=3, encoding="utf-8")
    except OSError as err:  # a read-only data folder: the app runs and logs to stderr
        _handler = logging.StreamHandler()
        logging.getLogger(__name__).warning("cannot write the log %s (%s); logging to stderr", log_file, err)
    _handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(_handler)
    if root.getEffectiveLevel() > logging.INFO:
        root.setLevel(logging.INFO)
    qInstallMessageHandler(_log_qt_message)
