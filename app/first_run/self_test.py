"""`wisp-desktop --self-test`: check an installed or bundled build without a screen. It starts Qt (offscreen
unless a platform is set), loads the theme and icons from the shipped resources, loads the bundled demo model
and generates a few tokens, prints one line and returns 0; any failure prints one line and returns 1."""

from __future__ import annotations

import os
import sys
import time

PROMPT = "def fibonacci(n):"
NUM_TOKENS = 8


class SelfTestError(Exception):
    pass


def check_qt() -> str:
    """Start Qt and read the resources the window needs; -> the platform plugin's name."""
    from PySide6.QtWidgets import QApplication

    from app.icons import icon
    from app.theme import load_theme, style_sheet

    application = QApplication.instance() or QApplication(["wisp-desktop"])
    style_sheet(load_theme("light"))
    if icon("wisp").isNull():
        raise SelfTestError("the app icon is missing from the resources")
    return application.platformName()


def generate_with_demo_model():
    """-> (ModelInfo, FinishEvent) of a few greedy tokens from the bundled demo model."""
    from app.engine_api import api

    engine_api = api()
    request = engine_api.GenerateRequest(
        prompt=PROMPT, sampling=engine_api.SamplingParams(max_tokens=NUM_TOKENS, ignore_eos=True))
    with engine_api.Engine(engine_api.EngineOptions(model=None)) as engine:
        finish = engine.generate(request)
    if finish.reason == "error":
        raise SelfTestError(f"generation failed: {finish.error}")
    if len(finish.token_ids) != NUM_TOKENS:
        raise SelfTestError(f"expected {NUM_TOKENS} tokens, got {len(finish.token_ids)}")
    return engine.info, finish


def run_self_test() -> int:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    started = time.perf_counter()
    try:
        platform = check_qt()
        info, finish = generate_with_demo_model()
    except Exception as err:  # the line a build script shows: never a bare traceback
        print(f"wisp-desktop self-test: FAILED: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    seconds = time.perf_counter() - started
    print(f"wisp-desktop self-test: ok: Qt {platform}, {info.name} on {info.device}, "
          f"{len(finish.token_ids)} tokens {finish.text!r}, {seconds:.1f} s (model: {info.path})")
    return 0
