"""The CLI's modules import in one direction: engine.cli.program -> the command modules -> engine.cli.options;
and importing one command module loads no other (pyproject's contracts check the imports themselves)."""

import subprocess
import sys

import pytest

from tests.cli.conftest import ROOT

COMMAND_MODULES = ("engine.cli.program", "engine.cli.run", "engine.cli.chat", "engine.cli.serve",
                   "engine.cli.chat_repl")


@pytest.mark.parametrize("module, must_not_load", [
    ("engine.cli.options", COMMAND_MODULES),
    ("engine.cli.run", ("engine.cli.program", "engine.cli.serve", "engine.cli.chat")),
    ("engine.cli.serve", ("engine.cli.program", "engine.cli.run", "engine.cli.chat")),
])
def test_no_module_imports_the_one_above_it(module, must_not_load):
    code = (f"import sys, {module}; loaded = [m for m in {must_not_load!r} if m in sys.modules]; "
            "print(','.join(loaded)); sys.exit(1 if loaded else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, f"{module} loads {done.stdout.strip()}"
