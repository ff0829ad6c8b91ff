"""How big the served model is, for Ollama's /api/tags: its weight files' bytes and its parameter count (read
from the safetensors headers; a GGUF file's count is not read here)."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".bin", ".pt")
MAX_HEADER_BYTES = 100_000_000  # safetensors' own limit on the JSON header


def weight_files(path: str) -> list[Path]:
    root = Path(path)
    if root.is_file():
        return [root]
    return sorted(file for file in root.glob("*") if file.suffix in WEIGHT_SUFFIXES and file.is_file()) \
        if root.is_dir() else []


def num_parameters(file: Path) -> int:
    """The parameter count a safetensors file's header lists (0 for other files or an unreadable header)."""
    if file.suffix != ".safetensors":
        return 0
    try:
        with file.open("rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            header = json.loads(handle.read(length)) if length <= MAX_HEADER_BYTES else {}
    except (OSError, ValueError, struct.error):
        return 0
    return sum(math.prod(entry.get("shape", ())) for name, entry in header.items()
               if name != "__metadata__" and isinstance(entry, dict))


def model_size(path: str) -> tuple[int, int]:
    """(bytes on disk, parameters) of the model at `path`; (0, 0) when it is not a local folder or file."""
    files = weight_files(path)
    return sum(file.stat().st_size for file in files), sum(num_parameters(file) for file in files)


def parameter_size(count: int) -> str:
    """Ollama's parameter_size: '30.5B', '7.6M'; '' when unknown."""
    for scale, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if count >= scale:
            return f"{count / scale:.1f}{unit}"
    return str(count) if count else ""
