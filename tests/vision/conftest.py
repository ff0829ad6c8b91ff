import pytest

from tests.vision.tiny_vl import write_tiny_vl


@pytest.fixture(scope="session")
def tiny_vl_dir(tmp_path_factory):
    return write_tiny_vl(tmp_path_factory.mktemp("tiny_vl"))


@pytest.fixture(scope="session")
def tiny_vl_moe_dir(tmp_path_factory):
    """qwen3_vl_moe (deepstack, a plain qwen3_moe language model)."""
    return write_tiny_vl(tmp_path_factory.mktemp("tiny_vl_moe"), model_type="qwen3_vl_moe")
