"""The memory-mapped GGUF reader agrees with the gguf package's GGUFReader, and refuses broken files by name."""

import numpy as np
import pytest
import torch

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.gguf.model_file import GgufModel, check_supported
from engine.gguf.reader import GgufFile, LazyArray
from engine.gguf.weights import load_gguf_weights
from tests.gguf.vocabs import rewrite_gguf


def test_fields_and_tensors_equal_gguf_readers(gguf_files):
    import gguf

    path = gguf_files.quantized("qwen2_moe", "Q4_K_M")
    file, reference = GgufFile(path), gguf.GGUFReader(path)
    for name, field in reference.fields.items():
        if name.startswith("GGUF."):
            continue
        expected = field.contents()
        value = file.get(name)
        assert (list(value) if isinstance(value, np.ndarray) else value) == pytest.approx(expected), name
    assert [t.name for t in reference.tensors] == list(file.tensors)
    for tensor in reference.tensors:
        info = file.tensors[tensor.name]
        assert (info.shape, info.qtype, info.num_bytes) == (tuple(reversed(tensor.shape.tolist())),
                                                            tensor.tensor_type, tensor.n_bytes)
        assert np.array_equal(file.raw(tensor.name), np.asarray(tensor.data).view(np.uint8).reshape(-1))


def test_long_arrays_are_decoded_only_when_asked(tmp_path):
    import gguf

    writer = gguf.GGUFWriter(tmp_path / "vocab.gguf", "qwen3moe")
    tokens = [f"tok{i}é" for i in range(5000)]
    writer.add_token_list(tokens)
    writer.add_token_scores([float(-i) for i in range(5000)])
    writer.add_token_merges(["a b"] * 3000)
    writer.add_tensor("token_embd.weight", np.arange(32, dtype=np.float32).reshape(4, 8))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    file = GgufFile(tmp_path / "vocab.gguf")
    assert isinstance(file.fields["tokenizer.ggml.tokens"], LazyArray)
    assert file.array("tokenizer.ggml.tokens") == tokens and file.get("tokenizer.ggml.merges") == ["a b"] * 3000
    assert np.array_equal(file.array("tokenizer.ggml.scores"), -np.arange(5000, dtype=np.float32))
    assert np.array_equal(file.raw("token_embd.weight").view(np.float32), np.arange(32, dtype=np.float32))


def test_truncated_and_foreign_files_are_refused_by_name(gguf_files, tmp_path):
    data = gguf_files.converted("olmoe", "f32").read_bytes()
    (tmp_path / "cut.gguf").write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelFormatError, match="cut.gguf: .*truncated"):
        GgufFile(tmp_path / "cut.gguf")
    (tmp_path / "x.gguf").write_bytes(b"PK\x03\x04" + bytes(64))
    with pytest.raises(ModelFormatError, match="x.gguf: .*not a GGUF file"):
        GgufFile(tmp_path / "x.gguf")
    assert check_supported(tmp_path / "x.gguf")[0] is False


def test_an_architecture_wisp_does_not_run_is_named(gguf_files, tmp_path):
    source = gguf_files.converted("olmoe", "f32")
    foreign = rewrite_gguf(source, tmp_path / "gemma.gguf", lambda key: not key.startswith("olmoe."),
                           architecture="gemma3")
    with pytest.raises(UnsupportedModelError, match="architecture 'gemma3' is not one Wisp's engine runs"):
        GgufModel(foreign).args
    supported, reason = check_supported(foreign)
    assert not supported and "gemma3" in reason


def test_a_missing_key_is_named(gguf_files, tmp_path):
    source = gguf_files.converted("qwen3_moe", "f32")
    broken = rewrite_gguf(source, tmp_path / "nohead.gguf", lambda key: key != "qwen3moe.attention.head_count")
    with pytest.raises(ModelFormatError, match="'qwen3moe.attention.head_count' is missing"):
        GgufModel(broken).args


def test_a_dense_llama_is_not_a_moe_model(gguf_files, tmp_path):
    source = gguf_files.converted("mixtral", "f32")
    dense = rewrite_gguf(source, tmp_path / "dense.gguf", lambda key: not key.startswith("llama.expert"))
    with pytest.raises(UnsupportedModelError, match="dense 'llama' model"):
        GgufModel(dense).args


def test_dense_tensors_dequantize_to_the_requested_dtype(gguf_files):
    model = GgufModel(gguf_files.converted("qwen3_moe", "q8_0"))
    tensor = model.dense_tensors()["layers.0.self_attn.q_proj.weight"]
    assert tensor.type_name == "Q8_0"
    assert tensor.dequantize(torch.bfloat16).dtype == torch.bfloat16
    assert torch.equal(tensor.dequantize(torch.bfloat16), tensor.dequantize().to(torch.bfloat16))


def test_a_tensor_wisp_would_ignore_makes_the_file_unsupported(gguf_files, tmp_path):
    source = gguf_files.converted("mixtral", "f32")

    def with_rope_freqs(reader):
        yield from ((t.name, t.data, t.tensor_type) for t in reader.tensors)
        yield "rope_freqs.weight", np.ones(8, np.float32), 0

    extra = rewrite_gguf(source, tmp_path / "freqs.gguf", tensors=with_rope_freqs)
    supported, reason = check_supported(extra)
    assert not supported and "would ignore (rope_freqs.weight)" in reason
    with pytest.raises(UnsupportedModelError, match="rope_freqs.weight"):
        load_gguf_weights(extra, torch.float32)
