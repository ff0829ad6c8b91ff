"""A broken or unsupported .gguf gives one readable line: in the CLI (exit 2), the API and the model picker."""

import pytest

from engine.api import Engine, EngineOptions, scan_models
from engine.cli import main
from engine.errors import ModelFormatError, UnsupportedModelError


def write_gguf(path, arch="qwen3moe", tensors=True):
    import gguf
    import numpy as np

    writer = gguf.GGUFWriter(path, arch)
    writer.add_block_count(1)
    if tensors:
        writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture
def truncated(demo_gguf, tmp_path):
    path = tmp_path / "truncated.gguf"
    path.write_bytes(demo_gguf.read_bytes()[: demo_gguf.stat().st_size // 2])
    return path


def cli_error(capsys, path) -> str:
    capsys.readouterr()
    assert main(["run", str(path), "--prompt", "hi", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    return err


def test_truncated_file(capsys, truncated):
    assert str(truncated) in cli_error(capsys, truncated) and "truncated" in cli_error(capsys, truncated)


def test_not_a_gguf_file(capsys, tmp_path):
    path = tmp_path / "notes.gguf"
    path.write_text("these are not weights")
    assert "not a GGUF file" in cli_error(capsys, path)


def test_unknown_architecture(tmp_path):
    with pytest.raises(UnsupportedModelError, match="architecture 'wispnet'"):
        Engine(EngineOptions(model=str(write_gguf(tmp_path / "x.gguf", arch="wispnet")), device="cpu"))


def test_missing_tensors_report_llama_cpps_reason(tmp_path):
    with pytest.raises(ModelFormatError, match="llama.cpp could not load it: .+"):
        Engine(EngineOptions(model=str(write_gguf(tmp_path / "empty.gguf")), device="cpu"))


def test_the_picker_describes_good_files_and_explains_broken_ones(demo_gguf, truncated):
    good, broken = scan_models([str(demo_gguf), str(truncated)])[-2:]
    assert good.is_usable and (good.model_type, good.num_experts, good.top_k, good.num_layers) == ("qwen3moe", 16, 4, 8)
    assert good.size_bytes == demo_gguf.stat().st_size
    assert not broken.is_usable and "truncated" in broken.error


def test_the_header_reader_skips_the_vocabulary_and_sizes_tensors(tmp_path):
    import gguf
    import numpy as np

    from engine.gguf.reader import GgufFile, LazyArray

    path = tmp_path / "vocab.gguf"
    writer = gguf.GGUFWriter(path, "qwen3moe")
    writer.add_token_list([f"t{i}" for i in range(20_000)])
    writer.add_head_count_kv([2, 4])
    writer.add_tensor("blk.0.ffn_up_exps.weight", gguf.quants.quantize(np.ones((4, 8, 64), np.float32),
                                                                        gguf.GGMLQuantizationType.Q8_0),
                      raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    header = GgufFile(path)
    assert isinstance(header.fields["tokenizer.ggml.tokens"], LazyArray)  # decoded only when asked for
    assert header.fields["qwen3moe.attention.head_count_kv"] == [2, 4]
    (tensor,) = header.tensors.values()
    assert tensor.shape == (4, 8, 64) and tensor.num_bytes == 4 * 8 * 2 * 34  # two Q8_0 blocks of 34 bytes per row
