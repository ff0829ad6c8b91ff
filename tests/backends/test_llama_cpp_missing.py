"""Without llama-cpp-python (the `llama` extra, not in the app's install), a GGUF file that needs llama.cpp is refused
with the exact pip command that installs it: by the engine, in the CLI's one line and in the picker's summary (the
app's dialog: tests/app/test_llama_cpp_missing_dialog.py). Imports of llama_cpp are blocked as on such an install."""

import shlex
import sys

import pytest

from engine.api import Engine, EngineOptions, fit_summary
from engine.cli import main
from engine.errors import UnsupportedModelError
from engine.gguf.backend_choice import LLAMA_CPP_REQUIREMENT, choose_backend, llama_cpp_install_command


@pytest.fixture
def without_llama_cpp(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # `import llama_cpp` raises ImportError


@pytest.fixture
def llama_cpp_only_gguf(demo_gguf, tmp_path):
    """The demo's twin with a pre-tokenizer Wisp's engine does not build: auto sends it to llama.cpp."""
    from tests.gguf.vocabs import rewrite_gguf

    path = rewrite_gguf(demo_gguf, tmp_path / "demo-deepseek-pre.gguf", lambda key: key != "tokenizer.ggml.pre",
                        lambda writer, fields: writer.add_tokenizer_pre("deepseek-llm"))
    assert choose_backend(path, "auto").backend == "llama.cpp"
    return path


def test_the_command_installs_the_llama_extras_requirement_into_this_python():
    assert shlex.split(llama_cpp_install_command()) == [sys.executable, "-m", "pip", "install", LLAMA_CPP_REQUIREMENT]


@pytest.mark.parametrize("backend", ["auto", "llama.cpp"])
def test_the_engine_refuses_with_the_command(backend, llama_cpp_only_gguf, without_llama_cpp):
    with pytest.raises(UnsupportedModelError) as refused:
        Engine(EngineOptions(model=str(llama_cpp_only_gguf), device="cpu", backend=backend))
    message = str(refused.value)
    assert llama_cpp_only_gguf.name in message and "llama-cpp-python is not installed" in message
    assert message.splitlines()[-1] == llama_cpp_install_command()


def test_the_cli_says_it_in_one_line(capsys, llama_cpp_only_gguf, without_llama_cpp):
    capsys.readouterr()
    assert main(["run", str(llama_cpp_only_gguf), "--prompt", "hi", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.endswith(llama_cpp_install_command())


def test_the_picker_says_llama_cpp_is_missing(llama_cpp_only_gguf, without_llama_cpp):
    options = EngineOptions(model=str(llama_cpp_only_gguf), budget_bytes=2**30)
    assert "llama.cpp, which is not installed" in fit_summary(options)

