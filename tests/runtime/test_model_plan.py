"""One model source -> one plan -> one build: the plan the picker shows (engine_plan, budget_marks) is the plan the
loader builds, for a safetensors folder, a folder of MXFP4 experts and a GGUF file."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.alloc.memory_plan import GiB
from engine.api import EngineOptions, budget_marks, engine_plan, open_source, plan_for
from engine.errors import BudgetError, UnsupportedModelError
from engine.launch import build_engine
from engine.loading.source import SourceKind, shape_source
from tests.gguf.conftest import GgufFiles
from tests.quant.mxfp4_models import write_mxfp4_pair
from tests.tiny_models import write_tiny_model


@pytest.fixture(scope="module")
def sources(tmp_path_factory, tiny_model_dir):
    root = tmp_path_factory.mktemp("sources")
    mxfp4, _ = write_mxfp4_pair(write_tiny_model(root / "dense", "gpt_oss"), root / "mxfp4", root / "reference")
    gguf = GgufFiles(root / "gguf").converted("qwen3_moe", "q8_0")
    return {SourceKind.SAFETENSORS: tiny_model_dir("qwen3_moe"), SourceKind.MXFP4: mxfp4, SourceKind.GGUF: gguf}


def paged_options(path, budget_bytes=None) -> EngineOptions:
    return EngineOptions(model=str(path), device="cpu", experts="paged", budget_bytes=budget_bytes, max_num_seqs=2)


def one_slot_over_the_minimum(options: EngineOptions) -> EngineOptions:
    plan = plan_for(open_source(options.model), options)
    return replace(options, budget_bytes=plan.marks.minimum + plan.sizes.num_moe_layers * plan.sizes.expert_bytes)


@pytest.mark.parametrize("kind", [SourceKind.SAFETENSORS, SourceKind.MXFP4, SourceKind.GGUF])
def test_the_picker_estimate_is_the_plan_the_loader_builds(sources, kind):
    options = one_slot_over_the_minimum(paged_options(sources[kind]))
    source = open_source(options.model)
    assert source.kind is kind
    estimate = engine_plan(options)
    core, info = build_engine(options)
    core.close()
    assert info.plan == estimate == core.plan
    assert estimate.min_layer_slots == info.top_k + 1 < info.num_experts
    assert info.dtype == str(plan_for(source, options).dtype).replace("torch.", "") == "float32"


@pytest.mark.parametrize("kind", [SourceKind.SAFETENSORS, SourceKind.GGUF])
def test_the_minimum_mark_is_the_least_budget_that_loads(sources, kind):
    options = paged_options(sources[kind])
    minimum = budget_marks(options).minimum
    with pytest.raises(BudgetError, match="the minimum is"):
        build_engine(replace(options, budget_bytes=minimum - 1))
    core, info = build_engine(replace(options, budget_bytes=minimum))
    core.close()
    assert info.plan.min_layer_slots == info.top_k and info.plan.total_bytes <= minimum


def test_the_estimate_follows_the_options_dtype_and_block_size(sources):
    """The drift the old estimate had: bf16 and 16-token blocks assumed whatever the options said."""
    options = replace(paged_options(sources[SourceKind.SAFETENSORS], GiB), block_size=32)
    fp32, bf16 = engine_plan(options), engine_plan(replace(options, dtype="bfloat16"))
    assert fp32.expert_bytes == 2 * bf16.expert_bytes and fp32.dense_bytes > bf16.dense_bytes
    plan = plan_for(open_source(options.model), options)
    assert fp32.kv_block_bytes == 32 * plan.sizes.kv_bytes_per_token


def test_sources_wisp_does_not_plan_say_why(sources):
    with pytest.raises(UnsupportedModelError, match="manages its own memory"):
        plan_for(open_source("http://127.0.0.1:9/v1"), EngineOptions())
    with pytest.raises(UnsupportedModelError, match="llama.cpp"):
        plan_for(open_source(str(sources[SourceKind.GGUF])), EngineOptions(backend="llama.cpp"))
    shape = shape_source("qwen3-30b-a3b")
    assert plan_for(shape, EngineOptions(device="cpu", dtype="bfloat16")).sizes.num_experts == 128
    with pytest.raises(UnsupportedModelError, match="no benchmark shape"):
        shape_source("no-such-shape")
