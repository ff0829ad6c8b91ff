"""bench/synthetic_gguf.py for a hybrid shape (qwen35moe: Gated DeltaNet + full attention every 4th layer): the
template alternates the two kinds so each (kind, plain or richer types) pair has a layer, llama.cpp's quantizer
picks every type, and the assembled file has the kinds and types of a whole Q4_K_M file; llama.cpp and Wisp both
run it."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from bench.synthetic_gguf import FULL, LINEAR, assemble, layer_sources, template_args, write_template
from engine.cli import main
from engine.model.shared_expert_args import SharedExpertArgs
from engine.quant.file_types import use_more_bits
from tests.gguf.models import quantize

pytest.importorskip("llama_cpp", reason="llama.cpp's quantizer makes the template's types")
LAYERS = 8  # full attention at 3 and 7; use_more_bits at 8 layers: 0, 3, 6, 7
EXPERTS = 16
BUDGET = "0.8125"  # GiB: with the tiny tower, 8 of 16 expert slots a layer


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """(quantized 4-layer template, assembled LAYERS-layer file): the Qwen3.5 layer pattern at rows of 256 (the
    narrowest llama.cpp k-quantizes), EXPERTS experts top-8."""
    folder = tmp_path_factory.mktemp("h2h-hybrid")
    args = template_args("qwen3.5-35b-a3b")
    linear = replace(args.linear, num_key_heads=2, num_value_heads=4, key_head_dim=64, value_head_dim=64)
    shared = SharedExpertArgs(shared_expert_intermediate_size=256)
    args = replace(args, hidden_size=256, moe_intermediate_size=256, shared_experts=shared,
                   vocab_size=512, num_attention_heads=4, num_key_value_heads=2, head_dim=64, num_experts=EXPERTS,
                   linear=linear)
    template = quantize(write_template(folder / "t-f16.gguf", args), folder / "t-Q4_K_M.gguf", "Q4_K_M")
    assemble(template, folder / "Q4_K_M.gguf", LAYERS, seed=3)
    return template, folder / "Q4_K_M.gguf"


def read(path):
    import gguf

    reader = gguf.GGUFReader(path)
    return reader, {t.name: t for t in reader.tensors}


def type_of(tensors, name) -> str:
    from gguf import GGMLQuantizationType

    return GGMLQuantizationType(tensors[name].tensor_type).name


def test_the_template_alternates_kinds_and_llama_cpp_gives_each_pair_its_types():
    args = template_args("qwen3.5-35b-a3b")
    assert args.layer_types == (LINEAR, FULL, LINEAR, FULL) and args.num_hidden_layers == 4


def test_assembled_layers_have_the_kind_and_types_of_a_whole_file(files):
    template, assembled = read(files[0])[1], read(files[1])
    reader, tensors = assembled
    assert int(reader.fields["qwen35moe.block_count"].contents()) == LAYERS
    assert int(reader.fields["qwen35moe.full_attention_interval"].contents()) == 4
    for layer in range(LAYERS):
        full = (layer + 1) % 4 == 0
        assert (f"blk.{layer}.attn_v.weight" in tensors) == full
        assert (f"blk.{layer}.attn_qkv.weight" in tensors) == (not full)
        richer = "Q6_K" if use_more_bits(layer, LAYERS) else "Q4_K"
        assert type_of(tensors, f"blk.{layer}.ffn_down_exps.weight") == richer
        assert type_of(tensors, f"blk.{layer}.{'attn_v' if full else 'attn_qkv'}.weight") == richer
    assert type_of(tensors, "blk.0.ssm_conv1d.weight") == "F32"  # llama.cpp's ssm_conv reads f32 only
    # layer 6 (linear, richer) is template layer 2 with its experts and router rows permuted the same way
    source, copy = template["blk.2.ffn_gate_inp.weight"].data, tensors["blk.6.ffn_gate_inp.weight"].data
    perm = [int(np.flatnonzero((source == row).all(axis=1))[0]) for row in copy]
    assert sorted(perm) == list(range(EXPERTS)) and perm != list(range(EXPERTS))
    assert np.array_equal(tensors["blk.6.ffn_up_exps.weight"].data, template["blk.2.ffn_up_exps.weight"].data[perm])


def test_a_template_without_a_kind_type_pair_is_refused(files):
    reader = read(files[0])[0]
    assert layer_sources(reader, "qwen35moe", "Q4_K_M", 4, interval=2) == {0: 0, 1: 1, 2: 2, 3: 3}
    with pytest.raises(ValueError, match="full_attention with ffn_down Q8_0"):
        layer_sources(reader, "qwen35moe", "Q8_0", 4, interval=4)


def test_llama_cpp_runs_the_assembled_file(files):
    from llama_cpp import Llama

    model = Llama(str(files[1]), n_ctx=64, n_threads=2, verbose=False, logits_all=True)
    model.eval([5, 9, 300, 42])
    assert model.n_vocab() == 512 and np.isfinite(np.asarray(model.scores[:4])).all()


def test_wisp_runs_the_file_with_the_same_bits_resident_and_paged(files, capsys):
    outputs = []
    for experts in (["--experts", "resident"], ["--experts", "paged", "--expert-slots", "8"]):
        assert main(["run", str(files[1]), "--prompt", "hello there", "--max-tokens", "3", "--device", "cpu",
                     "--backend", "wisp", "--json", *experts]) == 0
        outputs.append(json.loads(capsys.readouterr().out))
    resident, paged = outputs
    assert len(resident["token_ids"]) == 3 and np.isfinite(resident["logprobs"]).all()
    assert paged["token_ids"] == resident["token_ids"] and paged["logprobs"] == resident["logprobs"]
    assert paged["stats"]["expert_misses"] > 0 and resident["stats"]["expert_misses"] == 0


def test_wisp_bench_sees_an_image_on_the_file(files, tmp_path):
    """--image on a qwen35moe file: the tower beside the file's quantized dense weights, the same tokens paged."""
    from engine.traces.format import save
    from engine.traces.synth import spec_for_shape, synthesize

    spec = spec_for_shape("qwen3.5-35b-a3b", carry_over=0.6, skew=0.2, requests=2, prompt=64, tokens=24)
    save(synthesize(replace(spec, num_layers=LAYERS, num_experts=EXPERTS)), tmp_path / "routing.npz")
    assert main(["bench", "--gguf", str(files[1]), "--trace", str(tmp_path / "routing.npz"), "--budgets", BUDGET,
                 "--prompt", "8", "--tokens", "3", "--runs", "1", "--max-len", "256", "--device", "cpu",
                 "--arms", "resident,wisp", "--image", "64x48", "--tower", "tiny", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "Q4_K_M-Q4_K_M-b1-img64x48-p8-routing.json").read_text())
    assert result["facts"]["dense_weights"] == "file" and result["facts"]["tower"] == "tiny"
    rows = {row["arm"]: row for row in result["rows"]}
    assert set(rows) == {"resident", "wisp"} and not [r for r in rows.values() if "error" in r]
    assert rows["wisp"]["misses"] > 0 and rows["wisp"]["tokens"] == rows["resident"]["tokens"]
    assert all(0 < row["tower_share"] < 1 and row["image_tokens"] == 70 for row in rows.values())
