"""The bundle's entry point (PyInstaller needs a script, not a console-script entry)."""

import sys

from app.main import main

if __name__ == "__main__":
    sys.exit(main())
