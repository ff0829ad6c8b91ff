"""Resolve what the user named as MODEL: a folder, a .gguf file, a Hugging Face cache id, or nothing (the demo)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

from engine.errors import ModelFormatError

DEMO_MODEL = Path(__file__).resolve().parents[2] / "resources" / "demo_model"
HF_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


def hf_hub_cache() -> Path:
    """HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub (huggingface_hub's own rules)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    home = os.environ.get("HF_HOME") or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "huggingface"
    return Path(home).expanduser() / "hub"


def cached_snapshot(repo_id: str, cache: Path | None = None) -> Path | None:
    """The snapshot folder of models--org--name in the local cache: refs/main if present, else the newest."""
    repo = (cache or hf_hub_cache()) / ("models--" + repo_id.replace("/", "--"))
    ref = repo / "refs" / "main"
    if ref.is_file():
        snapshot = repo / "snapshots" / ref.read_text().strip()
        if snapshot.is_dir():
            return snapshot
    snapshots = sorted((repo / "snapshots").glob("*"), key=lambda p: p.stat().st_mtime) if repo.is_dir() else []
    return snapshots[-1] if snapshots else None


def is_remote_url(model) -> bool:
    """MODEL given as an OpenAI-compatible server's URL (http(s)://host[:port][/v1]): the remote backend."""
    if not isinstance(model, str) or not model:
        return False
    parts = urlsplit(model.strip())
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def resolve_model(model: str | os.PathLike | None) -> Path:
    """-> a local folder or .gguf file. Never downloads anything."""
    if model is None or str(model) == "":
        if not (DEMO_MODEL / "config.json").exists():
            raise ModelFormatError(f"the bundled demo model is missing from {DEMO_MODEL}; reinstall Wisp or name a model")
        return DEMO_MODEL
    path = Path(model).expanduser()
    if path.exists():
        return path
    if HF_ID.match(str(model)):
        snapshot = cached_snapshot(str(model))
        if snapshot is None:
            raise ModelFormatError(
                f"'{model}' is not in the local Hugging Face cache ({hf_hub_cache()}); Wisp never downloads - "
                f"fetch it first (e.g. `hf download {model}`) or pass a folder"
            )
        return snapshot
    raise ModelFormatError(f"{path}: no such file or folder")
