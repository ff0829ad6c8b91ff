"""A GGUF file's dense tensors on Wisp's engine (engine.quant.dense): with --dense-weights file every linear layer and
the token embedding whose tensor is of a type the quantized GEMV runs hold the file's blocks (none is dequantized on
the quiet), the rest are floats; the plan counts the bytes the model holds; the tokens are the same in every expert
mode; auto keeps them on CUDA only."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from engine.api import Engine, EngineOptions, engine_plan, open_source, plan_for
from engine.errors import RequestError
from engine.gguf.model_file import GgufModel
from engine.gguf.weights import param_types
from engine.launch import build_engine
from engine.model.attention import Attention
from engine.model.model_tree import meta_model
from engine.quant.dense import KEPT_TYPES, kept_bytes
from engine.quant.merged_projections import projection_specs
from engine.quant.quant_modules import QuantEmbedding, QuantLinear, planned_dense_bytes, weight_bytes
from tests.gguf.engine_runs import mode_options, outputs

CASES = [("qwen3_moe", "Q4_K_M"), ("qwen2_moe", "Q4_K_M"), ("glm4_moe", "Q8_0"), ("mixtral", "Q6_K")]


def file_options(path, **changes) -> EngineOptions:
    return EngineOptions(model=str(path), device="cpu", backend="wisp", max_model_len=64, dense_weights="file",
                         **changes)


def loaded_model(path, **changes):
    core, info = build_engine(file_options(path, **changes))
    return core, info, core.runner.model


@pytest.mark.parametrize("model_type,ftype", CASES)
def test_every_quantized_dense_tensor_stays_in_its_blocks(model_type, ftype, gguf_files):
    path = gguf_files.quantized(model_type, ftype)
    types = param_types(GgufModel(path))
    core, _, model = loaded_model(path)
    try:
        kept = 0
        for name, module in model.named_modules():
            file_type = types.get(f"{name}.weight")
            if isinstance(module, Attention):  # a merged layer (engine.quant.merged_projections) holds several
                for projection, spec in projection_specs(module).items():
                    assert spec.qtype.name == types[f"{name}.{projection}.weight"], (name, projection)
                    kept += 1
            if isinstance(module, QuantLinear) and len(module.parts) > 1:
                assert module.blocks.dtype == torch.uint8
            elif isinstance(module, (QuantLinear, QuantEmbedding)):
                assert module.spec.qtype.name == file_type, name  # the file's own type, not a conversion
                assert module.blocks.dtype == torch.uint8
                kept += name.rpartition(".")[2] not in ("q_proj", "k_proj", "v_proj")  # counted with Attention
            elif isinstance(module, (torch.nn.Linear, torch.nn.Embedding)):
                assert file_type not in KEPT_TYPES or name.endswith("kv_b_proj"), f"{name} ({file_type}) dequantized"
        assert kept >= 4 * 2 + 2  # q, k, v, o of both layers at least, the embedding and lm_head
        assert isinstance(model.embed_tokens, QuantEmbedding) and isinstance(model.lm_head, QuantLinear)
        for name, param in model.named_parameters():
            assert param.dtype == torch.float32, name  # norms, routers and biases stay float
    finally:
        core.close()


@pytest.mark.parametrize("model_type,ftype", CASES)
def test_the_plan_counts_the_bytes_the_model_holds(model_type, ftype, gguf_files):
    path = gguf_files.quantized(model_type, ftype)
    options = file_options(path, experts="paged", max_num_seqs=2)
    plan = plan_for(open_source(options.model), options)
    dequantized = plan_for(open_source(options.model), replace(options, dense_weights="dtype"))
    _, _, scratch = kept_bytes(meta_model(plan.args), param_types(GgufModel(path)), 4)
    core, info = build_engine(options)
    held, planned = weight_bytes(core.runner.model), planned_dense_bytes(core.runner.model, 4)
    core.close()
    assert plan.keeps_file_types and not dequantized.keeps_file_types
    assert plan.sizes.dense_bytes == held + scratch == planned
    assert plan.sizes.dense_bytes < dequantized.sizes.dense_bytes
    assert engine_plan(options) == info.plan == plan.memory


# glm4_moe in the slow step: qwen2_moe's shared expert and attention hold quantized dense weights too
@pytest.mark.parametrize("model_type,ftype", [("qwen2_moe", "Q4_K_M"),
                                              pytest.param("glm4_moe", "Q4_K_M", marks=pytest.mark.slow)])
def test_every_expert_mode_is_bitwise_resident_with_quantized_dense_weights(model_type, ftype, gguf_files):
    path = gguf_files.quantized(model_type, ftype)
    reference = outputs(path, experts="resident", dense_weights="file")
    assert len({ids for ids, _ in reference}) > 1
    for name, options in mode_options(path, dtype_bytes=4, dense_in_blocks=True).items():
        assert outputs(path, dense_weights="file", **options) == reference, name


@pytest.mark.parametrize("model_type,ftype", [("qwen3_moe", "Q4_K_M"), ("qwen2_moe", "Q4_K_M"), ("qwen3_next", "Q8_0")])
def test_merged_projections_generate_what_separate_ones_do(model_type, ftype, gguf_files):
    """The same bits with q, k and v in one layer (engine.quant.merged_projections; qwen2_moe's have biases,
    qwen3_next's q_proj also yields its gate) as in three, greedy, seeded and batched: each GEMV row and each part's
    prompt GEMM is computed as it was alone."""
    path = gguf_files.quantized(model_type, ftype)
    runs, names = {}, {}
    for merge_qkv in (False, True):
        core, _, model = loaded_model(path, merge_qkv=merge_qkv)
        names[merge_qkv] = {m.projection_names for m in model.modules() if isinstance(m, Attention)}
        core.close()
        runs[merge_qkv] = outputs(path, experts="resident", dense_weights="file", merge_qkv=merge_qkv)
    assert names[False] == {("q_proj", "k_proj", "v_proj")} and len(names[True] - names[False]) >= 1, names
    assert runs[True] == runs[False]


def test_quantized_dense_weights_generate_what_dequantized_ones_do(gguf_files):
    """Same weights, other summation order: on a tiny model the greedy tokens of the two agree."""
    path = gguf_files.quantized("qwen3_moe", "Q8_0")
    runs = {dense: outputs(path, dense_weights=dense) for dense in ("dtype", "file")}
    assert [ids for ids, _ in runs["file"]][:1] == [ids for ids, _ in runs["dtype"]][:1]


def test_auto_keeps_file_types_on_cuda_only():
    def keeps(choice, device_type):
        return EngineOptions(dense_weights=choice).keeps_file_types(device_type)

    assert keeps("auto", "cuda") and not keeps("auto", "cpu")
    assert keeps("file", "cpu") and not keeps("dtype", "cuda")
    with pytest.raises(Exception, match="dense weights"):
        EngineOptions(dense_weights="int4")


def test_a_cpu_engine_dequantizes_by_default(gguf_files):
    path = gguf_files.quantized("qwen3_moe", "Q4_K_M")
    with Engine(EngineOptions(model=str(path), device="cpu", backend="wisp", max_model_len=64)) as engine:
        model = engine._core.runner.model
        assert isinstance(model.embed_tokens, torch.nn.Embedding)
        assert not any(isinstance(m, QuantLinear) for m in model.modules())


def test_dense_quant_is_refused_for_a_gguf_file(gguf_files):
    """A GGUF file's dense tensors keep the types it was quantized to: --dense-quant names --dense-weights instead."""
    options = file_options(gguf_files.quantized("qwen3_moe", "Q4_K_M"), dense_quant="q8_0")
    for attempt in (lambda: build_engine(options), lambda: plan_for(open_source(options.model), options)):
        with pytest.raises(RequestError, match="--dense-weights"):
            attempt()


def test_merge_qkv_is_off_unless_the_cli_asks():
    import argparse

    from engine.cli.options import add_engine_options, engine_options

    parser = argparse.ArgumentParser()
    add_engine_options(parser)
    assert not engine_options(parser.parse_args(["model.gguf"])).merge_qkv
    assert engine_options(parser.parse_args(["model.gguf", "--merge-qkv"])).merge_qkv
