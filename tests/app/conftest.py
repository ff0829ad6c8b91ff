"""Drive the real desktop app headless (Qt's offscreen platform) on the tiny random qwen3_moe checkpoint.
Everything the app writes (conversations, settings, logs) goes to a temporary data folder."""

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

from app.launch_options import LaunchOptions  # noqa: E402
from app.main_window import MainWindowWidget  # noqa: E402

GiB = 1024**3
LOAD_TIMEOUT_MS = 30_000


@pytest.fixture
def data_dir(tmp_path):
    return tmp_path / "wisp-data"


@pytest.fixture
def tiny_model(tiny_model_dir):
    return str(tiny_model_dir("qwen3_moe"))


@pytest.fixture
def start_app(qtbot, data_dir, tiny_model):
    """start_app(**launch options) -> a shown MainWindowWidget whose model is ready (CPU, 1 GiB budget)."""

    def start(model=tiny_model, is_ready_awaited=True, **overrides):
        options = dict(data_dir=str(data_dir), model=model, device="cpu", budget_bytes=GiB, theme="light")
        window = MainWindowWidget(LaunchOptions(**{**options, **overrides}))
        qtbot.addWidget(window)
        window.show()
        # On a real screen (Xvfb) window shortcuts (Esc, Ctrl+N) reach only the active window, as for a person
        window.activateWindow()
        if is_ready_awaited:
            qtbot.waitUntil(lambda: window.loader.engine is not None, timeout=LOAD_TIMEOUT_MS)
        return window

    return start


@pytest.fixture(scope="session")
def app_gguf_files(run_artifact):
    """Tiny GGUF files quantized by llama.cpp's own quantizer (tests/gguf's GgufFiles), each made once per run."""
    from tests.gguf.conftest import GgufFiles

    return GgufFiles(run_artifact("app-gguf", lambda folder: None))


@pytest.fixture(scope="session")
def gguf_model(app_gguf_files) -> str:
    """A tiny qwen3_moe GGUF at Q8_0: Wisp's engine runs it (auto)."""
    return str(app_gguf_files.quantized("qwen3_moe", "Q8_0"))
