"""A Hugging Face model folder's config.json -> ModelArgs, without torch (the catalog and the app read it)."""

from __future__ import annotations

import json
from pathlib import Path

from engine.errors import ModelFormatError
from engine.model.args import ModelArgs
from engine.model.families import parse_config


def read_config(folder: Path) -> dict:
    path = folder / "config.json"
    if not folder.is_dir():
        raise ModelFormatError(f"{folder}: not a folder")
    if not path.exists():
        raise ModelFormatError(f"{path}: missing (a Hugging Face model folder needs config.json)")
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ModelFormatError(f"{path}: not valid JSON ({err})") from None
    except RecursionError:
        raise ModelFormatError(f"{path}: nests too deeply to be a model config") from None
    if not isinstance(config, dict):
        raise ModelFormatError(f"{path}: must hold a JSON object")
    return config


def read_args(folder: Path) -> ModelArgs:
    return parse_config(read_config(folder))
