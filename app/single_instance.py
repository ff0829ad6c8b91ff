"""One running app per user and data folder: a second launch asks the first to raise its window and exits.

The first instance holds a lock file and listens on a local socket (QLocalServer); a later one finds the lock
taken, connects (QLocalSocket), sends "activate" (or "open MODEL" when it was given a model: the first one then
loads it) and quits. A lock left by a crashed instance is stale (its
process is gone) and is taken over, as is the crashed instance's leftover socket."""

from __future__ import annotations

import getpass
import hashlib
import logging
import tempfile
from pathlib import Path

from PySide6.QtCore import QDeadlineTimer, QLockFile, QObject, QThread, Qt, Signal, Slot
from PySide6.QtNetwork import QLocalServer, QLocalSocket
from PySide6.QtWidgets import QWidget

log = logging.getLogger(__name__)
ACTIVATE = b"activate\n"
OPEN = b"open "
CONNECT_TIMEOUT_MS = 2_000


def instance_key(data_dir: Path) -> str:
    """A socket name unique to this user and data folder (short: Unix socket paths are limited)."""
    digest = hashlib.sha1(f"{getpass.getuser()}\0{data_dir.resolve()}".encode()).hexdigest()[:16]
    return f"wisp-desktop-{digest}"


class SingleInstance(QObject):
    """claim() once at start: True means this is the first instance (keep it alive while the app runs)."""

    activation_requested = Signal()  # GUI thread: a later launch asked this instance to show its window
    model_requested = Signal(str)  # GUI thread: a later launch was given this model (a path, or "demo")

    def __init__(self, key: str, parent: QObject | None = None):
        super().__init__(parent)
        self.key = key
        self._lock = QLockFile(str(Path(tempfile.gettempdir()) / f"{key}.lock"))
        self._lock.setStaleLockTime(0)  # stale only when the owning process is gone, never by age
        self._server: QLocalServer | None = None

    def claim(self, model: str | None = None) -> bool:
        """`model`: what this launch was asked to open; a running first instance is asked to load it."""
        if self._lock.tryLock(0):
            self._listen()
            return True
        message = ACTIVATE if model is None else OPEN + model.encode("utf-8") + b"\n"
        if self._send(message):
            return False
        log.warning("another instance holds %s but does not answer; starting anyway", self.key)
        return True

    def release(self) -> None:
        if self._server is not None:
            self._server.close()
        self._lock.unlock()

    def _listen(self) -> None:
        QLocalServer.removeServer(self.key)  # the socket of a crashed instance
        self._server = QLocalServer(self)
        self._server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        self._server.newConnection.connect(self._on_server_new_connection)
        if not self._server.listen(self.key):
            log.warning("single instance: cannot listen on %s: %s", self.key, self._server.errorString())

    def _send(self, message: bytes) -> bool:
        """Blocking, before the event loop runs; retries while the first instance is still starting."""
        deadline = QDeadlineTimer(CONNECT_TIMEOUT_MS)
        while not deadline.hasExpired():
            socket = QLocalSocket()
            socket.connectToServer(self.key)
            if socket.waitForConnected(int(deadline.remainingTime())):
                socket.write(message)
                is_sent = socket.waitForBytesWritten(int(deadline.remainingTime()))
                socket.disconnectFromServer()
                return is_sent
            QThread.msleep(50)  # the first instance holds the lock but is not listening yet
        return False

    @Slot()
    def _on_server_new_connection(self) -> None:
        while self._server.hasPendingConnections():
            socket = self._server.nextPendingConnection()
            socket.readyRead.connect(self._on_socket_ready_read)
            self._read_message(socket)

    @Slot()
    def _on_socket_ready_read(self) -> None:
        self._read_message(self.sender())

    def _read_message(self, socket: QLocalSocket) -> None:
        if not socket.canReadLine():
            return
        message = bytes(socket.readLine().data())
        socket.readyRead.disconnect(self._on_socket_ready_read)
        socket.abort()
        socket.deleteLater()
        if message == ACTIVATE:
            self.activation_requested.emit()
        elif message.startswith(OPEN) and message.endswith(b"\n"):
            self.activation_requested.emit()
            self.model_requested.emit(message[len(OPEN):-1].decode("utf-8", "replace"))


def raise_window(window: QWidget) -> None:
    """Bring a window to the front, restoring it if minimised (the desktop may only flash it instead)."""
    window.setWindowState((window.windowState() & ~Qt.WindowState.WindowMinimized) | Qt.WindowState.WindowActive)
    window.show()
    window.raise_()
    window.activateWindow()
