"""The README's app command installs everything the app shows: the API server ("Serve this model") and remote
servers need the server and remote extras, and the PySide6 it allows is one the app survives on."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def extra_requirements(extras: dict, name: str) -> set[str]:
    """The distribution names an extra pulls in, following wisp[...] references to other extras."""
    names = set()
    for requirement in extras[name]:
        nested = re.fullmatch(r"wisp\[([a-z,]+)\]", requirement.split(";")[0].strip())
        if nested:
            for other in nested.group(1).split(","):
                names |= extra_requirements(extras, other)
        else:
            names.add(re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].lower())
    return names


def test_the_app_extra_pulls_the_server_and_remote_dependencies():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    app = extra_requirements(extras, "app")
    assert {"starlette", "uvicorn", "pydantic", "httpx", "pyside6-essentials"} <= app
    assert app <= extra_requirements(extras, "test")


def test_the_pyside6_release_that_drops_none_is_excluded_where_none_is_mortal():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pyside = [r for r in extras["app"] if r.startswith("PySide6-Essentials")]
    assert any("!=6.12.0" in r and "python_version < '3.12'" in r for r in pyside)


def test_the_readme_app_command_installs_the_app_extra():
    readme = (ROOT / "README.md").read_text()
    assert re.search(r'pip install torch==[0-9.]+ -e "\.\[app[],]', readme)


def test_the_app_command_compiles_nothing_and_reads_gguf_files():
    """llama-cpp-python (a C++ build) is in its own extra; the gguf package Wisp's engine reads GGUF with is not."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert "llama-cpp-python" not in extra_requirements(extras, "app")
    assert "llama-cpp-python" in extra_requirements(extras, "test")  # the GGUF tests' reference
    assert any(r.startswith("gguf") for r in project["dependencies"])


def test_the_llama_extra_is_what_the_install_message_names():
    from engine.gguf.backend_choice import LLAMA_CPP_REQUIREMENT

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["llama"] == [LLAMA_CPP_REQUIREMENT]
