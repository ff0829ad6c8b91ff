import pytest

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
    from engine.cli import main

    folder = tmp_path_factory.mktemp("tiny_vl_gguf")
    model, mmproj = folder / "model.gguf", folder / "mmproj-tiny-f32.gguf"
    assert main(["convert-gguf", str(tiny_vl_dir), str(model), "--type", "f32", "--mmproj", str(mmproj)]) == 0
    return model
