import pytest

from tests.vision.tiny_gemma4 import write_tiny_gemma4_vl
from tests.vision.tiny_vl import write_tiny_vl


@pytest.fixture(scope="session")
def tiny_vl_dir(tmp_path_factory):
    return write_tiny_vl(tmp_path_factory.mktemp("tiny_vl"))


@pytest.fixture(scope="session")
def tiny_vl_moe_dir(tmp_path_factory):
    """qwen3_vl_moe (deepstack, a plain qwen3_moe language model)."""
    return write_tiny_vl(tmp_path_factory.mktemp("tiny_vl_moe"), model_type="qwen3_vl_moe")


@pytest.fixture(scope="session")
def tiny_vl_gguf(tiny_vl_dir, tmp_path_factory):
    """tiny_vl_dir as llama.cpp's downloads ship it: model.gguf with mmproj-tiny-f32.gguf beside it, both written by
    `wisp convert-gguf --mmproj` (f32)."""
    return converted_with_mmproj(tiny_vl_dir, tmp_path_factory.mktemp("tiny_vl_gguf"))


@pytest.fixture(scope="session")
def tiny_gemma4_dir(tmp_path_factory):
    """gemma4 as published: the vision tower beside the MoE language model (tests/vision/tiny_gemma4.py)."""
    return write_tiny_gemma4_vl(tmp_path_factory.mktemp("tiny_gemma4_vl"))


@pytest.fixture(scope="session")
def tiny_gemma4_gguf(tiny_gemma4_dir, tmp_path_factory):
    """tiny_gemma4_dir as model.gguf (llama.cpp's gemma4) with mmproj-tiny-f32.gguf (projector gemma4v) beside it."""
    return converted_with_mmproj(tiny_gemma4_dir, tmp_path_factory.mktemp("tiny_gemma4_gguf"))


def converted_with_mmproj(checkpoint, folder):
    """folder/model.gguf and folder/mmproj-tiny-f32.gguf, both written by `wisp convert-gguf --mmproj` (f32)."""
    from engine.cli import main

    model, mmproj = folder / "model.gguf", folder / "mmproj-tiny-f32.gguf"
    assert main(["convert-gguf", str(checkpoint), str(model), "--type", "f32", "--mmproj", str(mmproj)]) == 0
    return model
