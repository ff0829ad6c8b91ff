"""settings.json whatever it holds: each entry is checked on its own, a bad one falls back alone and is named,
the file is kept aside as settings.json.bad-DATE before it is rewritten, and a disk that refuses the write is
reported instead of raised. Fuzzed with hypothesis: loading never raises and keeps every entry that fits."""

import json
import os
import stat

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.remote_server import RemoteServer
from app.settings import AppSettings, SettingsStore
from app.settings_entries import CHECKS

SERVERS = [{"url": "http://gpu-box:8000/v1", "api_key": "sk-secret"}]


def write(path, content) -> None:
    path.write_text(content if isinstance(content, str) else json.dumps(content))


def test_one_bad_entry_falls_back_alone(tmp_path):
    path = tmp_path / "settings.json"
    write(path, {"model_folders": 5, "remote_servers": SERVERS, "temperature": "hot", "theme": "dark"})
    store = SettingsStore(path)
    loaded = store.load()
    assert loaded.remote_servers == (RemoteServer("http://gpu-box:8000/v1", "sk-secret"),)
    assert loaded.theme == "dark" and loaded.model_folders == () and loaded.temperature == AppSettings().temperature
    assert len(store.problems) == 2 and any("model_folders" in p for p in store.problems)


def test_the_file_is_kept_aside_before_it_is_rewritten(tmp_path):
    path = tmp_path / "settings.json"
    write(path, {"model_folders": 5, "remote_servers": SERVERS})
    store = SettingsStore(path)
    store.save(store.load().with_changes(theme="light"))
    kept = list(tmp_path.glob("settings.json.bad-*"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["model_folders"] == 5
    assert SettingsStore(path).load().remote_servers[0].api_key == "sk-secret"
    store.save(store.load())
    assert len(list(tmp_path.glob("settings.json.bad-*"))) == 1  # a good file is not kept again


def test_a_file_that_is_not_an_object_starts_from_defaults(tmp_path):
    path = tmp_path / "settings.json"
    for content in ("[]", "null", '"text"', "{broken", "[" * 20_000):
        write(path, content)
        store = SettingsStore(path)
        assert store.load() == AppSettings() and len(store.problems) == 1


def test_a_refused_write_is_reported_not_raised(tmp_path, monkeypatch):
    store = SettingsStore(tmp_path / "settings.json")

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("app.settings.write_text_atomic", full_disk)
    store.save(AppSettings(theme="dark"))
    assert "No space left" in store.save_error


def test_saved_settings_are_owner_only(tmp_path):
    store = SettingsStore(tmp_path / "settings.json")
    store.save(AppSettings(remote_servers=(RemoteServer("http://x/v1", "key"),)))
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children,
                                                                                       max_size=3), max_leaves=8)
GOOD = {"theme": "dark", "max_tokens": 77, "remote_servers": SERVERS, "model_folders": ["/m"]}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.dictionaries(st.sampled_from(sorted(CHECKS)) | st.text(max_size=6), JSON, max_size=6))
def test_fuzzed_files_load_and_keep_every_entry_that_fits(tmp_path, entries):
    path = tmp_path / "settings.json"
    raw = {**GOOD, **entries}
    write(path, json.dumps(raw))
    store = SettingsStore(path)
    loaded = store.load()
    for name, value in GOOD.items():
        if name not in entries:
            assert json.loads(json.dumps(getattr(loaded, name), default=vars)) == value
    assert len(store.problems) <= len(entries)
    store.save(loaded)
    assert SettingsStore(path).load() == loaded


KILLED_SAVE = """
import os, signal, sys
from pathlib import Path
from app.settings import AppSettings, SettingsStore
from app.remote_server import RemoteServer
os.replace = lambda *args: os.kill(os.getpid(), signal.SIGKILL)  # killed between the write and the rename
SettingsStore(Path(sys.argv[1])).save(AppSettings(remote_servers=(RemoteServer("http://box/v1", "sk-secret"),)))
"""


def test_a_save_killed_midway_leaves_a_temporary_that_the_next_start_removes(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "settings.json"
    subprocess.run([sys.executable, "-c", KILLED_SAVE, str(path)], check=False, timeout=60,
                   env={**os.environ, "PYTHONPATH": os.getcwd()})
    (left,) = tmp_path.glob(".settings.json.*.tmp")
    assert "sk-secret" in left.read_text()
    os.utime(left, (left.stat().st_atime - 120, left.stat().st_mtime - 120))
    in_progress = tmp_path / ".settings.json.newest.tmp"  # a save under way just now: not touched
    in_progress.write_text("{}")
    SettingsStore(path).load()
    assert not left.exists() and in_progress.exists()
