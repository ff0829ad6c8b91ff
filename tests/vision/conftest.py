import pytest

from tests.vision.tiny_vl import write_tiny_vl


@pytest.fixture(scope="session")
def tiny_vl_dir(tmp_path_factory):
    return write_tiny_vl(tmp_path_factory.mktemp("tiny_vl"))
