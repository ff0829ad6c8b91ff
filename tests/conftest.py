import os

import psutil
import pytest
import torch

if not torch.cuda.is_available():
    # Triton kernels (the device pager's) run in Triton's interpreter on the CPU; it must be on before
    # anything imports triton.
    os.environ.setdefault("TRITON_INTERPRET", "1")

try:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
except ImportError:
    pass

from tests.tiny_models import MODEL_TYPES, write_tiny_model


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


# Under pytest-xdist (`pytest -n auto`, as the README and CI run the suite) the workers share the machine's cores:
# each takes its share for torch's intra-op threads instead of every worker taking them all.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    torch.set_num_threads(max(1, usable_cores() // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))

GIB_PER_WORKER = 3  # memory set aside per worker, with room over what torch, transformers, Qt and llama.cpp hold
MAX_WORKERS = 8  # a many-core machine does not start dozens of processes that each import torch


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: without xdist (the GPU machine) nothing calls it
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: one worker per core, as many as memory holds at GIB_PER_WORKER each, at most MAX_WORKERS."""
    memory = psutil.virtual_memory().available // (GIB_PER_WORKER << 30)
    return max(1, min(usable_cores(), memory, MAX_WORKERS))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """model_type -> folder of a tiny random checkpoint (built once per session)."""
    cache = {}

    def get(model_type: str):
        if model_type not in cache:
            cache[model_type] = write_tiny_model(tmp_path_factory.mktemp(model_type), model_type)
        return cache[model_type]

    return get


@pytest.fixture(params=MODEL_TYPES)
def model_type(request):
    return request.param
