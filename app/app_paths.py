"""Where the app keeps its files: platformdirs' per-user folders, or one folder for everything when
WISP_DATA_DIR (or --data-dir) names one (tests, portable installs)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

from app.private_files import private_folder

APP_NAME = "wisp"
DATA_DIR_VARIABLE = "WISP_DATA_DIR"


@dataclass(frozen=True)
class AppPaths:
    data_dir: Path
    config_dir: Path
    log_dir: Path

    @property
    def database(self) -> Path:
        return self.data_dir / "conversations.sqlite3"

    @property
    def settings_file(self) -> Path:
        return self.config_dir / "settings.json"

    @property
    def log_file(self) -> Path:
        return self.log_dir / "wisp-desktop.log"

    @classmethod
    def resolve(cls, root: str | os.PathLike | None = None) -> "AppPaths":
        root = root or os.environ.get(DATA_DIR_VARIABLE)
        if root:
            folder = Path(root).expanduser()
            return cls(folder, folder, folder / "logs")
        return cls(
            Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)),
            Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)),
            Path(platformdirs.user_log_dir(APP_NAME, appauthor=False)),
        )

    def create(self) -> "AppPaths":
        """Make the folders that can be made: on a read-only disk the app still starts (the conversations open
        read-only, settings and logs are not written, and the user is told)."""
        for folder in (self.data_dir, self.config_dir, self.log_dir):
            try:
                if folder == self.log_dir:
                    private_folder(folder)
                else:
                    folder.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                logging.getLogger(__name__).warning("cannot create %s: %s", folder, err)
        return self
