"""`wisp serve` stopping on SIGINT / SIGTERM: the first signal stops accepting and ends every open stream
with a final chunk (finish_reason "abort"), the error saying why, and [DONE]; a second one exits at once."""

from __future__ import annotations

import os
import sys

import uvicorn


class GracefulServer(uvicorn.Server):
    """uvicorn's server whose shutdown cancels the requests in flight first (main thread, signal handlers)."""

    def handle_exit(self, sig, frame) -> None:
        if self.should_exit:  # the second signal: the user does not want to wait
            print("wisp: stopped at once", file=sys.stderr)
            os._exit(128 + int(sig))
        super().handle_exit(sig, frame)

    async def shutdown(self, sockets=None) -> None:
        self.config.app.state.bridge.stop()  # on the event loop: streams get their last chunks before closing
        await super().shutdown(sockets)
