"""bench/synthetic_gguf.py for the hybrid shapes (Gated DeltaNet + full attention every 4th layer: qwen35moe and
qwen3next): the template alternates the two kinds so each (kind, plain or richer types) pair has a layer, its tensors
are those llama.cpp's converter writes, llama.cpp's quantizer picks every type, and the assembled file has the kinds
and types of a whole Q4_K_M file; llama.cpp and Wisp both run it."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pytest

from bench.synthetic_gguf import FULL, LINEAR, assemble, layer_sources, template_args, write_template
from bench.synthetic_gguf_sizes import sizes_of
from engine.cli import main
from engine.gguf.tensor_map import gguf_architecture
from engine.model.args import ModelArgs
from engine.model.shared_expert_args import SharedExpertArgs
from engine.quant.file_types import use_more_bits
from tests.gguf.models import quantize

pytest.importorskip("llama_cpp", reason="llama.cpp's quantizer makes the template's types")
LAYERS = 8  # full attention at 3 and 7; use_more_bits at 8 layers: 0, 3, 6, 7
EXPERTS = 16
BUDGET = "0.8125"  # GiB: with the tiny tower, 8 of 16 expert slots a layer
SHAPES = ["qwen3.5-35b-a3b", "qwen3-next-80b-a3b"]
QWEN35 = ["qwen3.5-35b-a3b"]


@dataclass(frozen=True)
class Files:
    args: ModelArgs  # the template's
    f16: Path  # the 4-layer template
    template: Path  # the template quantized by llama.cpp
    assembled: Path  # LAYERS layers


def tiny(name: str):
    """The shape's layer pattern and top-k at rows of 256 (the narrowest llama.cpp k-quantizes), EXPERTS experts,
    2 key and 4 value DeltaNet heads of 64."""
    args = template_args(name)
    linear = replace(args.linear, num_key_heads=2, num_value_heads=4, key_head_dim=64, value_head_dim=64)
    shared = SharedExpertArgs(shared_expert_intermediate_size=256)
    return replace(args, hidden_size=256, moe_intermediate_size=256, shared_experts=shared, vocab_size=512,
                   num_attention_heads=4, num_key_value_heads=2, head_dim=64, num_experts=EXPERTS, linear=linear)


@pytest.fixture(scope="module")
def files(request, tmp_path_factory) -> Files:
    folder = tmp_path_factory.mktemp(f"h2h-{request.param}")
    args = tiny(request.param)
    f16 = write_template(folder / "t-f16.gguf", args)
    template = quantize(f16, folder / "t-Q4_K_M.gguf", "Q4_K_M")
    assemble(template, folder / "Q4_K_M.gguf", LAYERS, seed=3)
    return Files(args, f16, template, folder / "Q4_K_M.gguf")


def arch(files: Files) -> str:
    return gguf_architecture(files.args)


def read(path):
    import gguf

    reader = gguf.GGUFReader(path)
    return reader, {t.name: t for t in reader.tensors}


def type_of(tensors, name) -> str:
    from gguf import GGMLQuantizationType

    return GGMLQuantizationType(tensors[name].tensor_type).name


@pytest.mark.parametrize("name", SHAPES)
def test_the_template_alternates_kinds_and_llama_cpp_gives_each_pair_its_types(name):
    args = template_args(name)
    assert args.layer_types == (LINEAR, FULL, LINEAR, FULL) and args.num_hidden_layers == 4


HIDDEN, VOCAB, HEADS, HEAD_DIM, KV_HEADS, EXPERT_ROWS = 256, 512, 4, 64, 2, 256
KEY_DIM, VALUE_DIM, VALUE_HEADS = 2 * 64, 4 * 64, 4  # the tiny DeltaNet: 2 key and 4 value heads of 64


def llama_cpp_qwen3next_layer(layer: int, kind: str) -> dict[str, tuple[tuple[int, ...], str]]:
    """{name: (ggml ne, type)} of the tensors llama.cpp's loader (src/models/qwen3next.cpp) reads in one layer of the
    tiny shape, with the type its converter (conversion/qwen.py Qwen3NextModel, base.py prepare_tensors: tensors
    squeezed, then F32 for 1-D ones, norms, the router, the conv and names not ending .weight) writes at f16."""
    f32, f16 = "F32", "F16"
    if kind == LINEAR:
        attention = {"attn_qkv.weight": ((HIDDEN, 2 * KEY_DIM + VALUE_DIM), f16),
                     "attn_gate.weight": ((HIDDEN, VALUE_DIM), f16),
                     "ssm_conv1d.weight": ((4, 2 * KEY_DIM + VALUE_DIM), f32), "ssm_dt.bias": ((VALUE_HEADS,), f32),
                     "ssm_a": ((VALUE_HEADS,), f32), "ssm_ba.weight": ((HIDDEN, 2 * VALUE_HEADS), f16),
                     "ssm_norm.weight": ((64,), f32), "ssm_out.weight": ((VALUE_DIM, HIDDEN), f16)}
    else:  # q holds each head's query and output gate
        attention = {"attn_q.weight": ((HIDDEN, 2 * HEADS * HEAD_DIM), f16),
                     "attn_k.weight": ((HIDDEN, KV_HEADS * HEAD_DIM), f16),
                     "attn_v.weight": ((HIDDEN, KV_HEADS * HEAD_DIM), f16),
                     "attn_output.weight": ((HEADS * HEAD_DIM, HIDDEN), f16),
                     "attn_q_norm.weight": ((HEAD_DIM,), f32), "attn_k_norm.weight": ((HEAD_DIM,), f32)}
    rest = {"attn_norm.weight": ((HIDDEN,), f32), "post_attention_norm.weight": ((HIDDEN,), f32),
            "ffn_gate_inp.weight": ((HIDDEN, EXPERTS), f32),
            "ffn_gate_exps.weight": ((HIDDEN, EXPERT_ROWS, EXPERTS), f16),
            "ffn_up_exps.weight": ((HIDDEN, EXPERT_ROWS, EXPERTS), f16),
            "ffn_down_exps.weight": ((EXPERT_ROWS, HIDDEN, EXPERTS), f16),
            "ffn_gate_inp_shexp.weight": ((HIDDEN,), f32),  # the checkpoint's [1, hidden], squeezed
            "ffn_gate_shexp.weight": ((HIDDEN, 256), f16), "ffn_up_shexp.weight": ((HIDDEN, 256), f16),
            "ffn_down_shexp.weight": ((256, HIDDEN), f16)}
    return {f"blk.{layer}.{name}": value for name, value in {**attention, **rest}.items()}


@pytest.mark.parametrize("files", ["qwen3-next-80b-a3b"], indirect=True)
def test_the_qwen3next_template_holds_what_llama_cpp_s_converter_writes(files):
    reader, tensors = read(files.f16)
    expected = {"token_embd.weight": ((HIDDEN, VOCAB), "F16"), "output_norm.weight": ((HIDDEN,), "F32"),
                "output.weight": ((HIDDEN, VOCAB), "F16")}
    for layer, kind in enumerate((LINEAR, FULL, LINEAR, FULL)):
        expected.update(llama_cpp_qwen3next_layer(layer, kind))
    assert {name: (tuple(int(d) for d in t.shape), type_of(tensors, name)) for name, t in tensors.items()} == expected
    keys = {"ssm.conv_kernel": 4, "ssm.state_size": 64, "ssm.group_count": 2, "ssm.time_step_rank": VALUE_HEADS,
            "ssm.inner_size": VALUE_DIM, "full_attention_interval": 2, "rope.dimension_count": HEAD_DIM // 4,
            "expert_count": EXPERTS, "expert_used_count": 10, "expert_feed_forward_length": EXPERT_ROWS,
            "expert_shared_feed_forward_length": 256, "attention.key_length": HEAD_DIM}
    assert {key: int(reader.fields[f"qwen3next.{key}"].contents()) for key in keys} == keys


@pytest.mark.parametrize("files", SHAPES, indirect=True)
def test_assembled_layers_have_the_kind_and_types_of_a_whole_file(files):
    template, assembled = read(files.template)[1], read(files.assembled)
    reader, tensors = assembled
    assert int(reader.fields[f"{arch(files)}.block_count"].contents()) == LAYERS
    assert int(reader.fields[f"{arch(files)}.full_attention_interval"].contents()) == 4
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


@pytest.mark.parametrize("files", SHAPES, indirect=True)
def test_the_sizes_before_writing_are_the_files_bytes(files):
    kinds = tuple(FULL if (i + 1) % 4 == 0 else LINEAR for i in range(LAYERS))
    whole = replace(files.args, num_hidden_layers=LAYERS, layer_types=kinds, moe_layers=(True,) * LAYERS)
    sizes = sizes_of(files.args, whole, "Q4_K_M")

    def tensor_bytes(path):
        return sum(int(t.n_bytes) for t in read(path)[0].tensors)

    assert (sizes.template_f16, sizes.template_quantized, sizes.assembled) == (
        tensor_bytes(files.f16), tensor_bytes(files.template), tensor_bytes(files.assembled))


@pytest.mark.parametrize("files", QWEN35, indirect=True)
def test_a_template_without_a_kind_type_pair_is_refused(files):
    reader = read(files.template)[0]
    assert layer_sources(reader, arch(files), "Q4_K_M", 4, interval=2) == {0: 0, 1: 1, 2: 2, 3: 3}
    with pytest.raises(ValueError, match="full_attention with ffn_down Q8_0"):
        layer_sources(reader, arch(files), "Q8_0", 4, interval=4)


@pytest.mark.parametrize("files", SHAPES, indirect=True)
def test_llama_cpp_runs_the_assembled_file(files):
    from llama_cpp import Llama

    model = Llama(str(files.assembled), n_ctx=64, n_threads=2, verbose=False, logits_all=True)
    model.eval([5, 9, 300, 42])
    assert model.n_vocab() == 512 and np.isfinite(np.asarray(model.scores[:4])).all()


@pytest.mark.parametrize("files", SHAPES, indirect=True)
def test_wisp_runs_the_file_with_the_same_bits_resident_and_paged(files, capsys):
    outputs = []
    for experts in (["--experts", "resident"], ["--experts", "paged", "--expert-slots", "8"]):
        assert main(["run", str(files.assembled), "--prompt", "hello there", "--max-tokens", "3", "--device", "cpu",
                     "--backend", "wisp", "--json", *experts]) == 0
        outputs.append(json.loads(capsys.readouterr().out))
    resident, paged = outputs
    assert len(resident["token_ids"]) == 3 and np.isfinite(resident["logprobs"]).all()
    assert paged["token_ids"] == resident["token_ids"] and paged["logprobs"] == resident["logprobs"]
    assert paged["stats"]["expert_misses"] > 0 and resident["stats"]["expert_misses"] == 0


@pytest.mark.parametrize("files", QWEN35, indirect=True)
def test_wisp_bench_sees_an_image_on_the_file(files, tmp_path):
    """--image on a qwen35moe file: the tower beside the file's quantized dense weights, the same tokens paged."""
    from engine.traces.format import save
    from engine.traces.synth import spec_for_shape, synthesize

    spec = spec_for_shape("qwen3.5-35b-a3b", carry_over=0.6, skew=0.2, requests=2, prompt=64, tokens=24)
    save(synthesize(replace(spec, num_layers=LAYERS, num_experts=EXPERTS)), tmp_path / "routing.npz")
    assert main(["bench", "--gguf", str(files.assembled), "--trace", str(tmp_path / "routing.npz"), "--budgets", BUDGET,
                 "--prompt", "8", "--tokens", "3", "--runs", "1", "--max-len", "256", "--device", "cpu",
                 "--arms", "resident,wisp", "--image", "64x48", "--tower", "tiny", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "Q4_K_M-Q4_K_M-b1-img64x48-p8-routing.json").read_text())
    assert result["facts"]["dense_weights"] == "file" and result["facts"]["tower"] == "tiny"
    rows = {row["arm"]: row for row in result["rows"]}
    assert set(rows) == {"resident", "wisp"} and not [r for r in rows.values() if "error" in r]
    assert rows["wisp"]["misses"] > 0 and rows["wisp"]["tokens"] == rows["resident"]["tokens"]
    assert all(0 < row["tower_share"] < 1 and row["image_tokens"] == 70 for row in rows.values())


@pytest.mark.parametrize("files", ["qwen3-next-80b-a3b"], indirect=True)
def test_wisp_bench_pages_the_qwen3next_file_with_the_resident_tokens(files, tmp_path):
    """The device call's `wisp bench --gguf` on a qwen3next file: 0.5875 GiB (601.6 MiB) is just above the plan's
    minimum at max-len 256 (601.3 MiB, with 10 expert slots a layer), so 10 of the 16 experts have a slot."""
    from engine.traces.format import save
    from engine.traces.synth import spec_for_shape, synthesize

    spec = spec_for_shape("qwen3-next-80b-a3b", carry_over=0.8, skew=0.2, requests=2, prompt=64, tokens=24)
    save(synthesize(replace(spec, num_layers=LAYERS, num_experts=EXPERTS)), tmp_path / "routing.npz")
    assert main(["bench", "--gguf", str(files.assembled), "--trace", str(tmp_path / "routing.npz"), "--budgets",
                 "0.5875", "--prompt", "8", "--tokens", "3", "--runs", "1", "--max-len", "256", "--device", "cpu",
                 "--arms", "resident,wisp", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "Q4_K_M-Q4_K_M-b1-p8-routing.json").read_text())
    rows = {row["arm"]: row for row in result["rows"]}
    assert set(rows) == {"resident", "wisp"} and not [r for r in rows.values() if "error" in r]
    assert rows["wisp"]["slots_per_layer_min"] < EXPERTS and rows["wisp"]["misses"] > 0
    assert rows["wisp"]["tokens"] == rows["resident"]["tokens"]
