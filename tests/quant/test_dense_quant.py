"""--dense-quant q8_0 on a safetensors checkpoint (engine.quant.dense_quant): the dense linear layers and the
embedding a llama.cpp Q8_0 file would hold quantized are Q8_0 blocks made by the gguf package, the rest stay float;
the plan counts the bytes the model holds before anything loads (a budget that fits only quantized is taken); the
logits stay within Q8_0's rounding of the float model's; every expert mode gives the same bits; the option reaches
the engine from the command line and is refused where it cannot apply."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType, quants

from engine.api import BudgetError, Engine, EngineOptions, GenerateRequest, SamplingParams, open_source, plan_for
from engine.cli import build_parser
from engine.cli.options import UsageError, engine_options
from engine.errors import RequestError
from engine.launch import build_engine
from engine.quant.dense import FLOAT_MODULES, dense_spec
from engine.quant.dense_file_types import NOT_QUANTIZED
from engine.quant.dense_quant import quantize_weight
from engine.quant.linear import dequantize
from engine.quant.quant_modules import QuantEmbedding, QuantLinear, planned_dense_bytes, weight_bytes
from tests.gguf.engine_logits import agreement, prefill_logits
from tests.tiny_models import MODEL_TYPES

TOKENS = [5, 17, 99, 230, 41, 7, 8, 9, 10, 11, 12, 13, 300, 12, 250, 31]
PROMPTS = [(5, 17, 99, 230, 41), (300, 12), (7, 8, 9, 10, 11, 12, 13, 14, 15), (250,)]


def options(folder, **changes) -> EngineOptions:
    return EngineOptions(model=str(folder), device="cpu", max_model_len=64, **changes)


def test_the_blocks_are_the_gguf_packages_q8_0():
    weight = torch.randn(48, 96, dtype=torch.bfloat16)
    raw, spec = quantize_weight(weight, "Q8_0", "cpu")
    expected = quants.quantize(weight.float().numpy(), GGMLQuantizationType.Q8_0)
    assert spec == dense_spec("Q8_0", (48, 96)) and raw.numel() == 48 * 96 // 32 * 34
    assert np.array_equal(raw.numpy(), expected.reshape(-1))
    restored = dequantize(raw, spec, torch.float32)
    assert torch.allclose(restored, weight.float(), atol=weight.float().abs().max().item() / 127)


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_the_dense_weights_a_q8_0_file_quantizes_are_q8_0_blocks(model_type, tiny_model_dir):
    folder = tiny_model_dir(model_type)
    plan = plan_for(open_source(str(folder)), options(folder, dense_quant="q8_0"))
    as_stored = plan_for(open_source(str(folder)), options(folder))
    core, info = build_engine(options(folder, dense_quant="q8_0"))
    try:
        model = core.runner.model
        assert isinstance(model.embed_tokens, QuantEmbedding) and isinstance(model.lm_head, QuantLinear)
        for name, module in model.named_modules():
            if isinstance(module, (QuantLinear, QuantEmbedding)):
                assert module.spec.qtype.name == "Q8_0" and module.blocks.dtype == torch.uint8, name
            elif isinstance(module, torch.nn.Linear):  # what a Q8_0 GGUF file would also keep unquantized
                kept = (f"{name}.weight".endswith(NOT_QUANTIZED) or name.rpartition(".")[2] in FLOAT_MODULES
                        or module.in_features % 32 != 0)
                assert kept, f"{name} left in {module.weight.dtype}"
        args = plan.args  # gpt-oss's expert biases: counted as dense, held in the expert store
        biases = args.num_moe_layers * args.num_experts * (2 * args.moe_intermediate_size + args.hidden_size) * 4
        biases = biases if args.experts.bias else 0
        assert plan.sizes.dense_bytes == planned_dense_bytes(model, 4) + biases  # the plan is what the model holds
        assert weight_bytes(model) < 0.6 * as_stored.sizes.dense_bytes
        assert any("--dense-quant" in warning for warning in info.warnings)
    finally:
        core.close()


@pytest.mark.parametrize("model_type", ["qwen3_moe", "qwen2_moe", "gpt_oss"])
def test_logits_stay_within_q8_0_rounding_of_the_float_models(model_type, tiny_model_dir):
    folder = tiny_model_dir(model_type)
    logits = {}
    for dense_quant in (None, "q8_0"):
        with Engine(options(folder, dense_quant=dense_quant)) as engine:
            logits[dense_quant] = prefill_logits(engine, TOKENS)
    top1, kl = agreement(logits["q8_0"], logits[None])
    assert top1 >= 0.8 and kl <= 2e-3, (top1, kl)
    assert not np.array_equal(logits["q8_0"], logits[None])  # the option does change the outputs


def with_dequantized_layers(model) -> None:
    """Every QuantLinear of `model` replaced by an fp32 nn.Linear holding its dequantized weight."""
    for name, module in list(model.named_modules()):
        if isinstance(module, QuantLinear):
            linear = torch.nn.Linear(module.in_features, module.out_features, bias=module.bias is not None)
            linear.weight.data = dequantize(module.blocks, module.spec, torch.float32).view(linear.weight.shape)
            if module.bias is not None:
                linear.bias.data = module.bias.data
            parent, _, attr = name.rpartition(".")
            setattr(model.get_submodule(parent) if parent else model, attr, linear)


@pytest.mark.parametrize("model_type", ["qwen3_moe", "qwen3_next"])
def test_the_quantized_layers_compute_what_float_layers_of_the_rounded_weights_do(model_type, tiny_model_dir):
    """The tiny hybrid's random linear attention amplifies Q8_0's rounding far past a real model's (KL ~0.09 to the
    float model here), so its check is against the float model of the rounded weights."""
    folder = tiny_model_dir(model_type)
    with Engine(options(folder, dense_quant="q8_0")) as engine:
        quantized = prefill_logits(engine, TOKENS)
        with_dequantized_layers(engine._core.runner.model)
        rounded = prefill_logits(engine, TOKENS)
    np.testing.assert_allclose(quantized, rounded, atol=1e-4)


def generations(folder, **changes) -> list:
    greedy = SamplingParams(max_tokens=5, ignore_eos=True)
    seeded = SamplingParams(max_tokens=5, temperature=0.9, top_p=0.9, seed=11, ignore_eos=True)
    with Engine(options(folder, dense_quant="q8_0", **changes)) as engine:
        handles = engine.submit_batch([GenerateRequest(prompt_token_ids=p, sampling=(greedy, seeded)[i % 2])
                                       for i, p in enumerate(PROMPTS)])
        results = [h.result() for h in handles]
    assert all(r.error is None and len(r.token_ids) == 5 for r in results), results
    return [(tuple(r.token_ids), tuple(r.logprobs)) for r in results]


@pytest.mark.parametrize("model_type", ["qwen2_moe", "glm4_moe"])
def test_every_expert_mode_gives_the_resident_bits_with_q8_0_dense_weights(model_type, tiny_model_dir):
    folder = tiny_model_dir(model_type)
    paged = plan_for(open_source(str(folder)), options(folder, dense_quant="q8_0", experts="paged", budget_bytes=1))
    budget = paged.marks.minimum + paged.sizes.num_moe_layers * paged.sizes.expert_bytes
    reference = generations(folder, experts="resident")
    for changes in (dict(experts="static"), dict(experts="paged", expert_slots=paged.args.num_experts_per_tok),
                    dict(experts="paged", budget_bytes=budget)):
        assert generations(folder, **changes) == reference, changes


def test_a_budget_that_fits_only_with_q8_0_dense_weights_is_taken(tiny_model_dir):
    folder = tiny_model_dir("qwen3_moe")
    source = open_source(str(folder))
    minimum = plan_for(source, options(folder, dense_quant="q8_0", experts="paged", budget_bytes=1)).marks.minimum
    plan_for(source, options(folder, dense_quant="q8_0", experts="paged", budget_bytes=minimum)).memory
    with pytest.raises(BudgetError):
        plan_for(source, options(folder, experts="paged", budget_bytes=minimum)).memory


def test_the_flag_reaches_the_engine_options():
    parser = build_parser()
    assert engine_options(parser.parse_args(["run", "--prompt", "hi", "--dense-quant", "q8_0"])).dense_quant == "q8_0"
    assert engine_options(parser.parse_args(["run", "--prompt", "hi"])).dense_quant is None
    with pytest.raises(UsageError, match="--dense-quant"):
        parser.parse_args(["run", "--prompt", "hi", "--dense-quant", "q4_0"])
    with pytest.raises(RequestError, match="dense quant must be one of q8_0"):
        EngineOptions(dense_quant="int8")


def test_a_remote_server_refuses_it():
    with pytest.raises(RequestError, match="remote server"):
        build_engine(EngineOptions(model="http://127.0.0.1:9/v1", dense_quant="q8_0"))
