"""What `wisp-desktop` was started with (command line), as opposed to the saved settings."""

from __future__ import annotations

from dataclasses import dataclass

DEMO = "demo"


@dataclass(frozen=True)
class LaunchOptions:
    data_dir: str | None = None  # None: platformdirs' folders, or WISP_DATA_DIR
    model: str | None = None  # a path, DEMO for the bundled demo, or None for the last model used
    device: str = "auto"
    budget_bytes: int | None = None  # None: the saved budget, else one chosen from the hardware
    theme: str | None = None
    is_autoload: bool = True  # load a model at start
