"""Files a test run makes once and every pytest-xdist worker reads: one folder per run under pytest's cache folder,
each artifact built by the first worker that asks while the others wait on a file lock. Torch-free."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

RUN_CACHE_KEEP_S = 6 * 3600  # a run's folder outlives the run by this much, then the next run removes it


def shared_run_folder(config) -> Path | None:
    """One folder for every pytest-xdist worker of this run, under pytest's cache folder; None without xdist
    (one process: the session's tmp folder is already shared) or without the cache provider (`-p no:cacheprovider`)."""
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    cache = getattr(config, "cache", None)
    if not run_id or cache is None:
        return None
    runs = Path(cache.mkdir("wisp-runs"))
    for old in runs.iterdir():
        if old.name != run_id and time.time() - old.stat().st_mtime > RUN_CACHE_KEEP_S:
            shutil.rmtree(old, ignore_errors=True)
    folder = runs / run_id
    folder.mkdir(exist_ok=True)
    return folder


def lock_file(path: Path):
    """An exclusive lock on path, held while the returned file is open; a no-op off POSIX (one process there)."""
    handle = open(path, "w")
    if os.name == "posix":
        import fcntl

        fcntl.flock(handle, fcntl.LOCK_EX)
    return handle


def made_once(folder: Path, name: str, make):
    """The path (or tuple of paths) make() returned in the first process to ask for name; the others wait under a
    file lock and read it from folder/name.done (relative to folder), written only after make() returned (a process
    that died half-way left none). make() writes under folder."""
    folder.mkdir(parents=True, exist_ok=True)
    done = folder / f"{name}.done"
    with lock_file(folder / f"{name}.lock"):
        if not done.exists():
            made = make()
            paths = made if isinstance(made, tuple) else (made,)
            done.write_text(json.dumps({"paths": [str(Path(path).relative_to(folder)) for path in paths],
                                        "is_tuple": isinstance(made, tuple)}))
        record = json.loads(done.read_text())
    paths = tuple(folder / path for path in record["paths"])
    return paths if record["is_tuple"] else paths[0]


def build_once(folder: Path, name: str, build) -> Path:
    """folder/name, made by build(path) in the first process to ask; the others wait for it under a file lock.
    build writes into a scratch path that is renamed into place, so a half-built result is never seen."""
    target = folder / name
    with lock_file(folder / f"{name}.lock"):
        if not target.exists():
            scratch = folder / f"{name}.building"
            shutil.rmtree(scratch, ignore_errors=True)
            scratch.mkdir()
            build(scratch)
            scratch.rename(target)
    return target
