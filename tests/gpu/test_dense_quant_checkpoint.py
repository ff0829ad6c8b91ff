"""--dense-quant q8_0 on CUDA, run on the H200: `pytest -m gpu tests/gpu/test_dense_quant_checkpoint.py`. Fails (not
skips) without a GPU. A bf16 checkpoint's dense weights as Q8_0 blocks run the quantized GEMV (decode, CUDA graphs)
and GEMM (prompts): every expert mode gives the resident bits; the logits stay within Q8_0's rounding of the bf16
model's; the plan is the bytes the model holds, and the device holds fewer bytes than with bf16 dense weights."""

from __future__ import annotations

import pytest
import torch

from engine.api import Engine, EngineOptions
from engine.model.loader import read_args
from engine.quant.quant_modules import QuantLinear, planned_dense_bytes, weight_bytes
from tests.experts.test_expert_modes import mode_options
from tests.gguf.engine_logits import agreement, prefill_logits
from tests.gpu.test_cuda import bf16_model_dir, cuda_outputs  # noqa: F401 (bf16_model_dir is a fixture)

pytestmark = pytest.mark.gpu
TOKENS = [5, 17, 99, 230, 41, 7, 8, 9, 10, 11, 12, 13, 300, 12, 250, 31, 44, 45, 46, 47]


@pytest.mark.parametrize("model_type", ["qwen2_moe", "glm4_moe", "gpt_oss"])  # shared expert; dense layer; biases
def test_expert_modes_bitwise_with_q8_0_dense_weights_on_cuda(bf16_model_dir, model_type):
    folder = bf16_model_dir(model_type)
    args = read_args(folder)
    reference = cuda_outputs(folder, experts="resident", dense_quant="q8_0")
    assert reference != cuda_outputs(folder, experts="resident")  # the option changes the outputs
    for name, options in mode_options(args.num_experts_per_tok, args.num_experts).items():
        assert cuda_outputs(folder, dense_quant="q8_0", **options) == reference, name
    assert cuda_outputs(folder, experts="paged", expert_slots=3, decode="static", dense_quant="q8_0") == reference


@pytest.mark.parametrize("model_type", ["qwen3_moe", "qwen2_moe", "mixtral"])
def test_q8_0_dense_weights_stay_close_to_bf16_and_hold_fewer_bytes(bf16_model_dir, model_type):
    folder = bf16_model_dir(model_type)
    logits, held = {}, {}
    for dense_quant in (None, "q8_0"):
        with Engine(EngineOptions(model=str(folder), device="cuda", dense_quant=dense_quant)) as engine:
            model = engine._core.runner.model
            logits[dense_quant] = prefill_logits(engine, TOKENS)
            held[dense_quant] = weight_bytes(model)
            assert engine.info.plan.dense_bytes == planned_dense_bytes(model, 2)
            if dense_quant:
                assert model.lm_head.blocks.is_cuda and isinstance(model.layers[0].self_attn.q_proj, QuantLinear)
    top1, kl = agreement(logits["q8_0"], logits[None])
    print(f"{model_type}: Q8_0 against bf16 dense weights: top-1 {top1:.3f}, KL {kl:.5f}; "
          f"dense bytes {held[None]} -> {held['q8_0']}")
    assert top1 >= 0.8 and kl <= 5e-3
    assert held["q8_0"] < 0.6 * held[None]


def test_a_q8_0_layer_on_cuda_matches_the_cpu_reference(bf16_model_dir):
    """The GEMV and GEMM on CUDA against the torch reference's product on the same blocks (bf16 rounding apart)."""
    folder = bf16_model_dir("qwen3_moe")
    with Engine(EngineOptions(model=str(folder), device="cuda", dense_quant="q8_0")) as engine:
        layer = engine._core.runner.model.layers[0].self_attn.q_proj
        for rows in (1, 8, 9, 300):
            x = torch.randn(rows, layer.in_features, device="cuda").bfloat16()
            with torch.inference_mode():
                got = layer(x).double().cpu()
                cpu = QuantLinear(layer.blocks.cpu(), layer.spec)
                expected = cpu(x.float().cpu()).double()
            scale = expected.abs().max().item()
            torch.testing.assert_close(got, expected, rtol=2**-6, atol=2**-6 * scale)
