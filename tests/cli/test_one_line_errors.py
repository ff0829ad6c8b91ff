"""Bad command lines: status 2 and one line naming what is wrong, before any model loads; no usage dump,
no traceback. Also out-of-memory while loading, and `wisp --version`."""

import pytest

from engine.cli import main, out_of_memory_message


@pytest.mark.parametrize("argv, words", [
    (["run", "--budget", "-1GiB", "--prompt", "hi"], ["--budget", "--budget=-VALUE"]),
    (["run", "--budget=-1GiB", "--prompt", "hi"], ["--budget"]),
    (["run", "--budget", "0", "--prompt", "hi"], ["--budget", "positive"]),
    (["run", "--prompt", "hi", "--stop", ""], ["--stop"]),
    (["run", "--prompt", "hi", "--system", "be brief"], ["--system", "--chat"]),
    (["run", "--prompt", "hi", "--expert-slots", "100000"], ["--expert-slots"]),
    (["run", "--prompt", "hi", "--expert-slots", "4"], ["--expert-slots", "--experts paged"]),
    (["run", "--prompt", "hi", "--max-tokens", "0"], ["--max-tokens"]),
    (["run", "--prompt", "hi", "--temperature", "nan"], ["--temperature"]),
    (["run", "--prompt", "hi", "--top-k", "-3"], ["--top-k"]),
    (["run", "--prompt", "hi", "--seed", str(2**70)], ["--seed"]),
    (["run"], ["--prompt"]),
    (["frobnicate"], ["frobnicate"]),
    (["serve", "--port", "99999"], ["--port", "65535"]),
    (["serve", "--port=-1"], ["--port"]),
    (["serve", "--max-body-size", "lots"], ["--max-body-size"]),
])
def test_bad_arguments_are_one_line_and_status_2(argv, words, capsys):
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("wisp: error: ") and not captured.out
    for word in words:
        assert word in lines[0]


def test_expert_slots_beyond_the_model_are_refused(capsys):
    assert main(["run", "--device", "cpu", "--experts", "paged", "--expert-slots", "1000", "--prompt", "hi"]) == 2
    assert "16 experts per layer" in capsys.readouterr().err


@pytest.mark.parametrize("error", [
    RuntimeError("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you "
                 "tried to allocate 68705402880 bytes. Error code 12 (Cannot allocate memory)"),
    MemoryError(),
    type("OutOfMemoryError", (RuntimeError,), {})("CUDA out of memory. Tried to allocate 2.00 GiB.\nGPU 0 has..."),
])
def test_out_of_memory_while_loading_is_one_line(error, monkeypatch, capsys):
    import engine.launch

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(engine.launch, "build_engine", fail)
    assert main(["run", "--device", "cpu", "--prompt", "hi"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "out of" in lines[0] and "--budget" in lines[0]


def test_other_runtime_errors_are_not_taken_for_out_of_memory():
    assert out_of_memory_message(RuntimeError("shape mismatch")) is None


def test_out_of_memory_while_generating_is_one_line(monkeypatch, capsys):
    from engine.runtime.llm_engine import LLMEngine

    def fail(self):
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes.\nmore")

    monkeypatch.setattr(LLMEngine, "step", fail)
    assert main(["run", "--device", "cpu", "--prompt", "hi", "--max-tokens", "4"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "can't allocate memory" in lines[0]


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.startswith("wisp 0.")
