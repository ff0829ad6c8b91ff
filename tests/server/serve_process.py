"""`wisp serve` as a child process on a free loopback port, for tests of signals, limits and logs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
START_WITHIN_S = 120


class ServeProcess:
    """Starts `wisp serve --device cpu --port 0 ARGS` and waits for its URL; stderr is collected in `log`."""

    def __init__(self, *args: str):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        env.pop("WISP_API_KEY", None)
        self.process = subprocess.Popen([sys.executable, "-m", "engine.cli", "serve", "--device", "cpu", "--port",
                                         "0", *args], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env,
                                        cwd=ROOT)
        self.lines: list[str] = []
        self._url_ready = threading.Event()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        if not self._url_ready.wait(START_WITHIN_S):
            self.process.kill()
            raise RuntimeError("wisp serve did not start:\n" + self.log)
        self.url = re.search(r"http://\S+/v1", self.log).group(0)

    def _read_stderr(self) -> None:
        for raw in self.process.stderr:
            self.lines.append(raw.decode("utf-8", "replace"))
            if "Serving" in self.lines[-1]:
                self._url_ready.set()
        self._url_ready.set()

    @property
    def log(self) -> str:
        return "".join(self.lines)

    def wait(self, timeout_s: float) -> int:
        return self.process.wait(timeout_s)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def __enter__(self) -> "ServeProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def wait_for(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()
