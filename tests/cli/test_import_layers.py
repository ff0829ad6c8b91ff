"""The CLI's modules import in one direction: engine.cli -> the command modules -> engine.cli_options."""

import subprocess
import sys

import pytest

from tests.cli.conftest import ROOT

COMMAND_MODULES = ("engine.cli", "engine.cli_commands", "engine.server.command", "engine.chat_repl")


@pytest.mark.parametrize("module, must_not_load", [
    ("engine.cli_options", COMMAND_MODULES),
    ("engine.cli_commands", ("engine.cli", "engine.server.command")),
    ("engine.server.command", ("engine.cli", "engine.cli_commands")),
])
def test_no_module_imports_the_one_above_it(module, must_not_load):
    code = (f"import sys, {module}; loaded = [m for m in {must_not_load!r} if m in sys.modules]; "
            "print(','.join(loaded)); sys.exit(1 if loaded else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, f"{module} loads {done.stdout.strip()}"
