"""On CUDA, memory errors are one line and status 2: a budget beyond the GPU is refused before anything is
allocated, and a real out-of-memory while loading ends the command, not in a traceback."""

from __future__ import annotations

import pytest
import torch

from engine.cli import main

pytestmark = pytest.mark.gpu


def one_error_line(capsys) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("wisp: error: "), lines
    return lines[0]


def test_a_budget_beyond_the_gpu_is_refused(capsys):
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    assert main(["run", "--device", "cuda", "--budget", "100TiB", "--prompt", "hi"]) == 2
    assert "GPU's memory" in one_error_line(capsys)


def test_running_out_of_gpu_memory_while_loading_is_one_line(capsys):
    """Fill the GPU but 1 GiB, then ask for a 20 GiB budget: the KV cache allocation runs out of memory."""
    free, _ = torch.cuda.mem_get_info()
    filler = torch.empty(free - 2**30, dtype=torch.uint8, device="cuda")
    try:
        status = main(["run", "--device", "cuda", "--budget", "20GiB", "--prompt", "hi", "--max-tokens", "2"])
    finally:
        del filler
        torch.cuda.empty_cache()
    assert status == 2 and "out of device memory" in one_error_line(capsys)
