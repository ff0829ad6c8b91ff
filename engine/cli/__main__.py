"""`python -m engine.cli ARGS`, the same as `wisp ARGS`."""

import sys

from engine.cli.program import main

sys.exit(main())
