"""The images of saved conversations: one file per distinct image under the data folder, named by the SHA-256 of
its bytes (a message keeps the names in its info), so the same screenshot sent twice is stored once."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


class ImageStore:
    def __init__(self, folder: Path):
        self.folder = folder

    def path(self, digest: str) -> Path:
        return self.folder / digest[:2] / digest

    def put(self, data: bytes) -> str:
        """Keep `data` (written to a temporary file and renamed, so a reader never sees half an image); -> its
        digest. Raises OSError when the disk refuses."""
        digest = hashlib.sha256(data).hexdigest()
        path = self.path(digest)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_name(f".{digest}.{os.getpid()}.tmp")
            temporary.write_bytes(data)
            os.replace(temporary, path)
        return digest

    def get(self, digest: str) -> bytes | None:
        """The image's bytes, or None when its file is gone (or the name is not a digest this store gives)."""
        if len(digest) != 64 or not all(ch in "0123456789abcdef" for ch in digest):
            return None
        try:
            return self.path(digest).read_bytes()
        except OSError:
            return None

    def remove_unused(self, used: set[str]) -> None:
        """Delete the images no saved message names any more (a file the disk keeps stays, unused)."""
        for path in self.folder.glob("??/*"):
            if len(path.name) == 64 and path.name not in used:
                try:
                    path.unlink(missing_ok=True)
                except OSError:
                    pass
