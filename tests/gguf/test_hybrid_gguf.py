"""GGUF files of the hybrid linear-attention models (llama.cpp's qwen3next and qwen35moe; engine.model.families.
hybrid_gguf) written by `wisp convert-gguf`: an f32 file generates its checkpoint's tokens, its ModelArgs are the
checkpoint's in the file's layout, the planner and the picker count its linear-attention state, older qwen3next
files (the fused ssm_in) run too, and the converter refuses what llama.cpp's graphs would compute otherwise.
(test_hybrid_llama_cpp compares with llama.cpp; test_wisp_engine_modes runs them in every expert mode;
test_convert_gguf has llama.cpp read them back.)"""

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest

from engine.api import (Engine, EngineOptions, GenerateRequest, SamplingParams, budget_marks, engine_plan,
                        open_source, plan_for)
from engine.errors import UnsupportedModelError
from engine.gguf.convert import convert
from engine.gguf.model_file import GgufModel
from engine.model.linear_args import QKV_Z_B_A, QKV_Z_BA, QKVZ_BA
from engine.model.loader import read_args
from tests.gguf.engine_runs import outputs
from tests.tiny_models import HYBRID_TYPES

FILE_LAYOUT = {"qwen3_next": (QKV_Z_BA, False), "qwen3_5_moe": (QKV_Z_B_A, True)}


@pytest.fixture(scope="module")
def converted(tiny_model_dir, tmp_path_factory):
    """model_type -> its tiny checkpoint converted to f32 (once per module)."""
    root, made = tmp_path_factory.mktemp("hybrid-gguf"), {}

    def get(model_type: str):
        if model_type not in made:
            made[model_type] = convert(tiny_model_dir(model_type), root / f"{model_type}.gguf", "f32").path
        return made[model_type]

    return get


@pytest.mark.parametrize("model_type", HYBRID_TYPES)
def test_an_f32_file_generates_its_checkpoints_tokens(model_type, tiny_model_dir, converted):
    """The same tokens, greedy and seeded, alone and batched; logprobs equal to float rounding only, as for every
    architecture: a GGUF file's experts run the block-format expert kernel (F32 blocks here), a folder's the dense
    one. The file's own layout changes no bit (test_an_older_qwen3next_file_...)."""
    reference = outputs(tiny_model_dir(model_type), max_tokens=4)
    ours = outputs(converted(model_type), max_tokens=4)
    assert len({ids for ids, _ in reference}) > 1
    assert [ids for ids, _ in ours] == [ids for ids, _ in reference]
    assert np.allclose([lp for _, lps in ours for lp in lps], [lp for _, lps in reference for lp in lps],
                       rtol=0, atol=1e-5)


@pytest.mark.parametrize("model_type", HYBRID_TYPES)
def test_the_files_args_are_the_checkpoints_in_the_files_layout(model_type, tiny_model_dir, converted):
    model = GgufModel(converted(model_type))
    projections, tiled = FILE_LAYOUT[model_type]
    args = read_args(tiny_model_dir(model_type))
    expected = replace(args, linear=replace(args.linear, projections=projections, tiled_value_heads=tiled,
                                            llama_cpp_values=True))
    # feed_forward_length is written whatever the checkpoint says (0 when it has none); no layer is dense
    assert model.args == replace(expected, intermediate_size=model.args.intermediate_size) and model.support()[0]
    assert model.args.state_bytes_per_seq(4) == args.state_bytes_per_seq(4) > 0
    assert model.architecture == {"qwen3_next": "qwen3next", "qwen3_5_moe": "qwen35moe"}[model_type]


@pytest.mark.parametrize("model_type", HYBRID_TYPES)
def test_the_plan_of_a_file_counts_the_state_the_engine_allocates(model_type, tiny_model_dir, converted):
    options = EngineOptions(model=str(converted(model_type)), device="cpu", max_num_seqs=3)
    plan = plan_for(open_source(options.model), options)
    folder_plan = plan_for(open_source(str(tiny_model_dir(model_type))), replace(options, model=str(
        tiny_model_dir(model_type))))
    assert plan.sizes.state_bytes_per_seq == folder_plan.sizes.state_bytes_per_seq > 0
    assert plan.sizes.kv_bytes_per_token == folder_plan.sizes.kv_bytes_per_token
    with Engine(options) as engine:
        assert engine.plan.state_bytes == engine._core.runner.cache.state_bytes == 3 * plan.sizes.state_bytes_per_seq


@pytest.mark.parametrize("model_type", HYBRID_TYPES)
def test_the_picker_marks_a_file_as_its_checkpoint(model_type, tiny_model_dir, converted):
    """An f32 file and its f32 checkpoint: the same dense, expert, KV and state bytes, so the same budget marks."""
    from engine.loading.catalog import describe

    paged = dict(device="cpu", experts="paged", max_num_seqs=2)
    file_options = EngineOptions(model=str(converted(model_type)), **paged)
    folder_options = EngineOptions(model=str(tiny_model_dir(model_type)), **paged)
    assert budget_marks(file_options) == budget_marks(folder_options)
    assert engine_plan(file_options).state_bytes == engine_plan(folder_options).state_bytes == 2 * GgufModel(
        converted(model_type)).args.state_bytes_per_seq(4)
    entry = describe(converted(model_type))
    assert (entry.num_layers, entry.num_experts, entry.num_shared_experts, entry.error) == (4, 8, 1, None)


def test_configure_plans_the_state_of_a_file(converted):
    from argparse import Namespace

    from engine.cli.configure import configure_plan

    path = converted("qwen3_5_moe")
    cli = Namespace(model=str(path), device="cpu", dtype="auto", budget=1 << 30, concurrency=4, max_context=256)
    plan = configure_plan(cli)
    assert plan.gguf is not None and plan.gguf.architecture == "qwen35moe"
    assert plan.sizes.state_bytes_per_seq == GgufModel(path).args.state_bytes_per_seq(4) > 0


@pytest.mark.parametrize("change,message", [({"norm_topk_prob": False}, "renormalises"),
                                            ({"attention_bias": True}, "attention biases"),
                                            ({"linear_value_head_dim": 32}, "linear_key_head_dim")])
def test_a_checkpoint_llama_cpp_would_compute_differently_is_refused(change, message, tiny_model_dir, tmp_path):
    folder = tmp_path / "changed"
    shutil.copytree(tiny_model_dir("qwen3_next"), folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(UnsupportedModelError, match=message):
        convert(folder, tmp_path / "x.gguf", "f32")
    assert not list(tmp_path.glob("*.gguf*"))


def fused_qkvz(reader, linear):
    """The tensors of a qwen3next file as llama.cpp's converter wrote them before it split q|k|v from z: each
    linear layer's attn_qkv and attn_gate merged back into the checkpoint's in_proj_qkvz (per key head: q, k, v, z),
    named ssm_in."""
    import numpy as np

    tensors = {t.name: t for t in reader.tensors}
    hk, dk = linear.num_key_heads, linear.key_head_dim
    value_rows = linear.num_value_heads // hk * linear.value_head_dim
    for tensor in reader.tensors:
        if tensor.name.endswith(".attn_gate.weight"):
            continue
        if not tensor.name.endswith(".attn_qkv.weight"):
            yield tensor.name, tensor.data, tensor.tensor_type
            continue
        qkv, z = np.asarray(tensor.data), np.asarray(tensors[tensor.name.replace("attn_qkv", "attn_gate")].data)
        q, k, v = np.split(qkv, [hk * dk, 2 * hk * dk])
        heads = [part.reshape(hk, -1, qkv.shape[-1]) for part in (q, k, v, z)]
        assert heads[2].shape[1] == value_rows
        yield tensor.name.replace("attn_qkv", "ssm_in"), np.concatenate(heads, axis=1).reshape(-1, qkv.shape[-1]), 0


def test_an_older_qwen3next_file_with_the_fused_ssm_in_runs_as_its_checkpoint(tiny_model_dir, converted, tmp_path):
    from tests.gguf.vocabs import rewrite_gguf

    path = converted("qwen3_next")
    linear = read_args(tiny_model_dir("qwen3_next")).linear
    older = GgufModel(rewrite_gguf(path, tmp_path / "ssm_in.gguf", tensors=lambda reader: fused_qkvz(reader, linear)))
    assert "blk.0.ssm_in.weight" in older.file.tensors and "blk.0.attn_qkv.weight" not in older.file.tensors
    assert older.support()[0] and older.args.linear.projections == QKVZ_BA
    # the checkpoint's layout computes the bits of llama.cpp's current one, and llama.cpp reads it as well
    assert outputs(older.path, max_tokens=4) == outputs(path, max_tokens=4)
    request = GenerateRequest(prompt_token_ids=(5, 17, 99, 230, 41), sampling=SamplingParams(max_tokens=8,
                                                                                              ignore_eos=True))
    tokens = []
    for backend in ("wisp", "llama.cpp"):
        with Engine(EngineOptions(model=str(older.path), device="cpu", backend=backend, max_model_len=64)) as engine:
            tokens.append(engine.generate(request).token_ids)
    assert tokens[0] == tokens[1]


def with_an_mtp_block(source, out):
    """The file as Qwen3.5's GGUFs with multi-token prediction are: one more block past the last (a copy of it, plus
    the nextn tensors) counted in block_count and named by nextn_predict_layers."""
    import gguf
    import numpy as np

    from tests.gguf.vocabs import rewrite_gguf

    def tensors(reader):
        listed = [(t.name, t.data, t.tensor_type) for t in reader.tensors]
        extra = [(name.replace("blk.3.", "blk.4."), data, kind) for name, data, kind in listed
                 if name.startswith("blk.3.")]
        hidden = int(reader.fields["qwen35moe.embedding_length"].contents())
        f32 = gguf.GGMLQuantizationType.F32
        extra += [("blk.4.nextn.eh_proj.weight", np.zeros((hidden, 2 * hidden), np.float32), f32)]
        extra += [(f"blk.4.nextn.{norm}.weight", np.ones(hidden, np.float32), f32) for norm in ("enorm", "hnorm")]
        return listed + extra

    def add(writer, fields):
        writer.add_block_count(5)
        writer.add_nextn_predict_layers(1)

    return rewrite_gguf(source, out, keep=lambda key: key != "qwen35moe.block_count", add=add, tensors=tensors)


def test_the_multi_token_prediction_block_of_a_qwen35moe_file_is_skipped(converted, tmp_path):
    path = converted("qwen3_5_moe")
    mtp = GgufModel(with_an_mtp_block(path, tmp_path / "mtp.gguf"))
    assert mtp.file.get("qwen35moe.block_count") == 5 and "blk.4.nextn.eh_proj.weight" in mtp.file.tensors
    assert mtp.support()[0] and mtp.args == GgufModel(path).args and mtp.args.num_hidden_layers == 4
    import torch

    from engine.gguf.weights import load_gguf_weights

    ours, theirs = (load_gguf_weights(p, torch.float32).state_dict for p in (mtp.path, path))
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[name], theirs[name]) for name in ours)
