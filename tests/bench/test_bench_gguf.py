"""The head-to-head's GGUF file and `wisp bench --gguf` on the CPU: a 2-layer template quantized by llama.cpp,
assembled into more layers with llama.cpp's per-layer type mix and permuted experts, loaded by llama.cpp and run
by every bench arm of Wisp's."""

import json
from dataclasses import replace

import numpy as np
import pytest

from bench.synthetic_gguf import assemble, write_template
from engine.cli import main
from engine.model.shapes import shape
from engine.quant.file_types import expert_types
from tests.gguf.models import quantize

pytest.importorskip("llama_cpp", reason="llama.cpp's quantizer makes the template's types")
LAYERS = 4
EXPS = ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """(quantized 2-layer template, assembled LAYERS-layer file): the Qwen3-30B-A3B topology (128 experts, top 8) at
    rows of 256, the narrowest llama.cpp k-quantizes."""
    folder = tmp_path_factory.mktemp("h2h")
    args = replace(shape("qwen3-30b-a3b", 2), hidden_size=256, moe_intermediate_size=256, vocab_size=512,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=64, torch_dtype="float16")
    template = quantize(write_template(folder / "t-f16.gguf", args), folder / "t-Q4_K_M.gguf", "Q4_K_M")
    assemble(template, folder / "Q4_K_M.gguf", LAYERS, seed=3)
    return template, folder / "Q4_K_M.gguf"


def tensors(path) -> dict:
    import gguf

    return {t.name: t for t in gguf.GGUFReader(path).tensors}


def test_assembled_layers_have_llama_cpp_types_and_permuted_experts(files):
    template, assembled = (tensors(path) for path in files)
    wanted = expert_types("Q4_K_M", list(range(LAYERS)), LAYERS, 256, 256)
    permuted = 0
    for layer in range(LAYERS):
        types = tuple(assembled[f"blk.{layer}.{name}.weight"].tensor_type.name for name in EXPS)
        assert types == wanted[layer]
        source = 1 if wanted[layer][2] == "Q6_K" else 0  # at 2 layers llama.cpp gives layer 1 the Q6_K down
        assert assembled[f"blk.{layer}.attn_v.weight"].tensor_type == template[f"blk.{source}.attn_v.weight"].tensor_type
        rows = {name: assembled[f"blk.{layer}.{name}.weight"].data for name in (*EXPS, "ffn_gate_inp")}
        origin = {name: template[f"blk.{source}.{name}.weight"].data for name in (*EXPS, "ffn_gate_inp")}
        # expert e of this layer is one template expert p, the same p for its three matrices and its router row
        index = {origin["ffn_gate_exps"][p].tobytes(): p for p in range(128)}
        order = [index[rows["ffn_gate_exps"][e].tobytes()] for e in range(128)]
        assert sorted(order) == list(range(128))
        for name in rows:
            assert np.array_equal(rows[name], origin[name][order]), name
        permuted += order != list(range(128))
    assert permuted == LAYERS
    assert np.array_equal(assembled["output.weight"].data, template["output.weight"].data)


def test_a_template_without_the_richer_layer_is_refused(files, tmp_path):
    import gguf

    from bench.synthetic_gguf import file_type_name, layer_sources

    reader = gguf.GGUFReader(files[0])
    assert file_type_name(reader) == "Q4_K_M"
    assert layer_sources(reader, "qwen3moe", "Q4_K_M", 4) == {0: 0, 1: 0, 2: 1, 3: 1}  # use_more_bits at 4 layers: 2 and 3
    with pytest.raises(ValueError, match="no layer of full_attention with ffn_down Q8_0"):
        layer_sources(reader, "qwen3moe", "Q8_0", 4)


def test_a_disk_without_room_for_the_file_is_one_line_before_writing(files, tmp_path, monkeypatch, capsys):
    import shutil

    from bench import synthetic_gguf

    monkeypatch.setattr(synthetic_gguf.shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(1, 1, 2**20))
    with pytest.raises(SystemExit) as exit_:
        synthetic_gguf.main(["assemble", str(files[0]), str(tmp_path / "x.gguf"), "--layers", str(LAYERS)])
    error = capsys.readouterr().err
    assert exit_.value.code == 2 and "GiB and its disk has 0.0 GiB free" in error and error.count("\n") == 1
    assert not (tmp_path / "x.gguf").exists()


def test_llama_cpp_runs_the_assembled_file(files):
    from llama_cpp import Llama

    model = Llama(str(files[1]), n_ctx=64, n_threads=2, verbose=False, logits_all=True)
    model.eval([5, 9, 300, 42])
    assert model.n_vocab() == 512 and np.isfinite(np.asarray(model.scores[:4])).all()


@pytest.mark.slow
def test_wisp_bench_runs_every_arm_on_the_gguf_file(files, tmp_path):
    assert main(["bench", "--gguf", str(files[1]), "--trace", "resources/traces/qwen3-published_chat-carry44.npz",
                 "--budgets", "0.6", "--prompt", "8", "--tokens", "3", "--runs", "1", "--max-len", "128",
                 "--device", "cpu", "--arms", "resident,wisp,static-uva", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "Q4_K_M-Q4_K_M-b1-p8-qwen3-published_chat-carry44.json").read_text())
    assert result["facts"]["gguf"] == "Q4_K_M.gguf" and result["facts"]["quant"] == "Q4_K_M"
    assert result["facts"]["layers"] == LAYERS and result["facts"]["expert_bytes"] > 0
    rows = {row["arm"]: row for row in result["rows"]}
    assert set(rows) == {"resident", "wisp", "static-uva"} and not [r for r in rows.values() if "error" in r]
    assert rows["wisp"]["misses"] > 0 and rows["resident"]["misses"] == 0
    assert rows["wisp"]["tokens"] == rows["resident"]["tokens"] == rows["static-uva"]["tokens"]


def test_a_gguf_file_it_cannot_open_is_one_line_and_status_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "--gguf", str(tmp_path / "missing.gguf"), "--trace", "resources/traces/qwen3-twin_chat.npz",
              "--device", "cpu", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"wisp bench: {tmp_path / 'missing.gguf'}: cannot open it")


def test_an_also_session_reruns_the_arms_on_dequantized_dense_weights(files, tmp_path):
    assert main(["bench", "--gguf", str(files[1]), "--trace", "resources/traces/qwen3-published_chat-carry44.npz",
                 "--budgets", "0.6", "--prompt", "8", "--tokens", "2", "--runs", "1", "--max-len", "128",
                 "--device", "cpu", "--arms", "resident", "--out", str(tmp_path),
                 "--also", "--dense-weights dtype"]) == 0
    quantized = json.loads((tmp_path / "Q4_K_M-Q4_K_M-b1-p8-qwen3-published_chat-carry44.json").read_text())
    dequantized = json.loads((tmp_path / "Q4_K_M-Q4_K_M-dense-dtype-b1-p8-qwen3-published_chat-carry44.json").read_text())
    assert quantized["facts"]["dense_weights"] == "file" and dequantized["facts"]["dense_weights"] == "dtype"
    assert quantized["facts"]["dense_gib"] < dequantized["facts"]["dense_gib"]
    assert not [row for result in (quantized, dequantized) for row in result["rows"] if "error" in row]
