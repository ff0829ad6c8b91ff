"""`wisp-desktop`: start the desktop app.

    wisp-desktop [MODEL] [--data-dir DIR] [--device auto|cpu|cuda] [--budget SIZE] [--theme system|light|dark]

MODEL is a model folder or "demo"; without it the app opens the model used last (the demo model at first)."""

from __future__ import annotations

import argparse
import sys

from PySide6.QtWidgets import QApplication

from app.launch_options import LaunchOptions
from app.settings import THEMES


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="wisp-desktop", description="Wisp: MoE language models on your GPU.")
    parser.add_argument("model", nargs="?", help='a model folder, or "demo" (default: the model used last)')
    parser.add_argument("--data-dir", help="keep conversations, settings and logs in this folder")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    parser.add_argument("--budget", help="device memory budget, e.g. 12GiB (default: the saved one)")
    parser.add_argument("--theme", choices=THEMES)
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
    options = launch_options(args)
    application = QApplication.instance() or QApplication(sys.argv[:1])
    application.setApplicationName("Wisp")
    application.setDesktopFileName("wisp-desktop")
    from app.main_window import MainWindowWidget

    window = MainWindowWidget(options)
    window.show()
    return application.exec()


if __name__ == "__main__":
    sys.exit(main())
