import gc
import os
from pathlib import Path

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

from tests.run_artifacts import build_once, shared_run_folder
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


def pytest_collection_finish(session):
    """Every Engine built collects cyclic garbage (engine/model/model_tree.py) and makes enough objects (its KV
    blocks) to set off automatic collections, and each scans every object the process tracks: here torch's,
    transformers' and every test module's (docs/contributing.md, the CI budget). Objects alive once the tests are
    collected stay alive all run, so they move to the permanent generation that collections skip; objects made
    later are collected as before."""
    gc.collect()
    gc.freeze()


def pytest_unconfigure(config):
    gc.unfreeze()  # the interpreter's shutdown finalizes them as it would have


@pytest.fixture(scope="session")
def run_artifact(request, tmp_path_factory):
    """run_artifact(name, build) -> a folder that build(folder) filled, made once per test run: under
    pytest-xdist one worker builds it and every worker reads it. Treat it as read-only (copy it before changing it):
    other tests in other processes read the same files. build must give the same files in every process."""
    shared = shared_run_folder(request.config) if os.name == "posix" else None
    made: dict[str, Path] = {}

    def get(name: str, build) -> Path:
        if name not in made:
            if shared is None:
                folder = tmp_path_factory.mktemp(name)
                build(folder)
                made[name] = folder
            else:
                made[name] = build_once(shared, name, build)
        return made[name]

    return get


@pytest.fixture(scope="session")
def tiny_model_dir(run_artifact):
    """model_type -> folder of a tiny random checkpoint (seeded: the same files in every process), built once per
    test run. Read-only: copy it before changing a file in it."""

    def get(model_type: str) -> Path:
        return run_artifact(f"tiny-{model_type}", lambda folder: write_tiny_model(folder, model_type))

    return get


@pytest.fixture(scope="session")
def demo_gguf(run_artifact):
    """The bundled demo model's f32 GGUF twin, converted once per test run."""
    from engine.gguf.convert import convert
    from engine.loading.model_path import DEMO_MODEL

    folder = run_artifact("demo-gguf", lambda out: convert(DEMO_MODEL, out / "demo-f32.gguf", "f32"))
    return folder / "demo-f32.gguf"


@pytest.fixture(params=MODEL_TYPES)
def model_type(request):
    return request.param
