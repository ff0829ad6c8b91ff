"""`wisp-desktop`: start the desktop app.

    wisp-desktop [MODEL] [--data-dir DIR] [--device auto|cpu|cuda] [--budget SIZE] [--theme system|light|dark]
    wisp-desktop --self-test

MODEL is a model folder or "demo"; without it the app opens the model used last (the demo model at first).
One app runs per user and data folder: a second launch raises the first one's window and exits. The first run
shows the welcome dialog."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from PySide6.QtWidgets import QApplication

from app.app_paths import AppPaths
from app.crash_handler import CrashHandler
from app.launch_options import DEMO, LaunchOptions
from app.none_refcount_guard import guard_none_refcount
from app.platform_check import platform_problem
from app.settings import THEMES
from app.single_instance import SingleInstance, instance_key, raise_window

APP_ID = "wisp-desktop"  # the .desktop file's name and its StartupWMClass (packaging/linux/)


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="wisp-desktop", description="Wisp: MoE language models on your GPU.")
    parser.add_argument("model", nargs="?", help='a model folder, or "demo" (default: the model used last)')
    parser.add_argument("--data-dir", help="keep conversations, settings and logs in this folder")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--budget", help="device memory budget, e.g. 12GiB (default: the saved one)")
    parser.add_argument("--theme", choices=THEMES)
    parser.add_argument("--self-test", action="store_true",
                        help="check this build without a screen: load the demo model, generate a few tokens, exit")
    return parser.parse_args(argv)


def launch_options(args: argparse.Namespace) -> LaunchOptions:
    budget = None
    if args.budget:
        from app.engine_api import api

        try:
            budget = api().parse_size(args.budget)
        except api().WispError as err:
            raise SystemExit(f"wisp-desktop: {err}") from None
    return LaunchOptions(data_dir=args.data_dir, model=args.model, device=args.device, budget_bytes=budget,
                         theme=args.theme)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.self_test:
        from app.first_run.self_test import run_self_test

        return run_self_test()
    options = launch_options(args)
    problem = None if QApplication.instance() else platform_problem()
    if problem:  # Qt would print its own lines and abort
        print(problem, file=sys.stderr)
        return 2
    application = QApplication.instance() or QApplication([APP_ID])  # argv[0] names the X11 WM_CLASS instance
    application.setApplicationName("Wisp")
    application.setDesktopFileName(APP_ID)
    paths = AppPaths.resolve(options.data_dir).create()
    instance = SingleInstance(instance_key(paths.data_dir), application)
    guard_none_refcount()
    requested = options.model if options.model in (None, DEMO) else str(Path(options.model).expanduser().resolve())
    if not instance.claim(requested):
        print("wisp-desktop is already running: its window was brought to the front.")
        return 0
    CrashHandler(paths.log_dir, application).install(capture_stderr=True)
    window = open_main_window(options, paths)
    instance.activation_requested.connect(lambda: raise_window(window))
    instance.model_requested.connect(lambda model: window.load_model(None if model == DEMO else model))
    return application.exec()


def open_main_window(options: LaunchOptions, paths: AppPaths):
    """Show the main window, with the welcome dialog over it on the first run."""
    from app.first_run.first_run_state import claim_first_run
    from app.first_run.welcome_dialog import open_welcome
    from app.main_window import MainWindowWidget

    is_first_run = claim_first_run(paths.config_dir)
    window = MainWindowWidget(options)
    window.show()
    if is_first_run:
        open_welcome(window)
    return window


if __name__ == "__main__":
    sys.exit(main())
