"""The layer rules of pyproject.toml's [tool.importlinter] contracts hold (lint-imports), and engine.api really
imports without torch."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def lint_imports() -> str:
    beside = Path(sys.executable).with_name("lint-imports")
    return str(beside) if beside.exists() else shutil.which("lint-imports") or "lint-imports"


def test_the_import_contracts_hold():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([lint_imports(), "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def test_engine_api_imports_without_torch():
    code = "import sys, engine.api; assert 'torch' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60)


def contracts() -> dict[str, dict]:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return {contract["name"]: contract for contract in config["tool"]["importlinter"]["contracts"]}


def engine_root_modules() -> set[str]:
    import pkgutil

    return {f"engine.{module.name}" for module in pkgutil.iter_modules([str(ROOT / "engine")])}


def test_the_engine_layers_name_every_root_module_and_exempt_no_import():
    """A new package or root module of engine/ gets a layer (so its imports are checked), and no import is let
    through the layers by an ignore."""
    layers = next(c for c in contracts().values() if c["name"].startswith("Layers of the engine"))
    layered = {module.strip() for layer in layers["layers"] for module in layer.split("|")}
    assert layered == engine_root_modules()
    assert not layers.get("ignore_imports")


def test_the_app_may_import_engine_api_only():
    """An allow-list: the whole engine is forbidden to the app, and the one import let through is of engine.api."""
    app = next(c for c in contracts().values() if c["source_modules"] == ["app"] and c["type"] == "forbidden"
               and "engine" in c["forbidden_modules"])
    assert app["forbidden_modules"] == ["engine"]
    assert [rule.split("->")[1].strip() for rule in app["ignore_imports"]] == ["engine.api"]
