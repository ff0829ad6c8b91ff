import os

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
