"""Artifacts shared by a run's xdist workers: built once however many processes ask at once, never seen half-built,
and each run's folder kept apart from the others'."""

import multiprocessing
import os
import time
from pathlib import Path
from types import SimpleNamespace

from tests.run_artifacts import RUN_CACHE_KEEP_S, build_once, shared_run_folder


def slow_build(folder: Path) -> None:
    """Leaves a mark of every call beside the artifact, and takes long enough for the other processes to ask."""
    with open(folder.parent / "builds.log", "a") as log:
        log.write(f"{os.getpid()}\n")
    time.sleep(0.3)
    (folder / "weights.bin").write_bytes(b"x" * 1000)


def ask(folder: str, seen: multiprocessing.Queue) -> None:
    target = build_once(Path(folder), "model", slow_build)
    seen.put((target / "weights.bin").stat().st_size)


def test_four_processes_asking_at_once_build_once_and_all_read_the_whole_artifact(tmp_path):
    context = multiprocessing.get_context("fork")
    seen = context.Queue()
    workers = [context.Process(target=ask, args=(str(tmp_path), seen)) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    assert [worker.exitcode for worker in workers] == [0, 0, 0, 0]
    assert sorted(seen.get(timeout=5) for _ in workers) == [1000] * 4
    assert len((tmp_path / "builds.log").read_text().split()) == 1


def test_a_failed_build_leaves_nothing_and_the_next_asker_builds_again(tmp_path):
    def broken(folder: Path) -> None:
        (folder / "half.bin").write_bytes(b"x")
        raise OSError("disk full")

    try:
        build_once(tmp_path, "model", broken)
    except OSError:
        pass
    assert not (tmp_path / "model").exists()
    target = build_once(tmp_path, "model", slow_build)
    assert sorted(path.name for path in target.iterdir()) == ["weights.bin"]


def fake_config(cache_root: Path):
    def mkdir(name: str) -> Path:
        (cache_root / name).mkdir(parents=True, exist_ok=True)
        return cache_root / name

    return SimpleNamespace(cache=SimpleNamespace(mkdir=mkdir))


def test_each_run_has_its_own_folder_and_stale_runs_are_removed(tmp_path, monkeypatch):
    config = fake_config(tmp_path)
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "old")
    old = shared_run_folder(config)
    stale = time.time() - RUN_CACHE_KEEP_S - 60
    os.utime(old, (stale, stale))
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "recent")
    recent = shared_run_folder(config)
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "now")
    now = shared_run_folder(config)
    assert now.name == "now" and now != recent
    assert recent.exists() and not old.exists()


def test_without_xdist_or_without_the_cache_nothing_is_shared(tmp_path, monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_TESTRUNUID", raising=False)
    assert shared_run_folder(fake_config(tmp_path)) is None
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "run")
    assert shared_run_folder(SimpleNamespace()) is None
