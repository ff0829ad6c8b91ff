"""Wisp's engine against llama.cpp on the same llama.cpp-quantized file (Q8_0 and Q4_K_M, every architecture).

llama.cpp's CPU kernels quantize activations before each quantized matmul (Q8_0 blocks for Q8_0 weights, Q8_K
blocks for k-quants); Wisp multiplies the dequantized weights by the activations as they are. On random tiny
models, whose logits are flat and whose routers have near ties, that rounding alone flips argmaxes: on plain
qwen3_moe and mixtral models (peak 0) Wisp matched llama.cpp's top-1 at 78-93% of 512 teacher-forced positions
(KL 0.016-0.076 nats), and greedy runs parted within 6-16 tokens.
So these tests use peaked models (tests/gguf/models.write_model's `peak`: the token embedding dominates the
residual stream and lm_head favours a successor of every token; tests/gguf/peaked): greedy decoding at peak 50,
where every step has a clear winner, and the
teacher-forced logits at peak 30, where attention and the experts still move them a lot; and a
test-only reference that rounds activations the way llama.cpp does (tests/gguf/activation_quant) shows that the
remaining gap is that rounding and nothing else."""

import numpy as np
import pytest

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.gguf.model_file import GgufModel
from tests.gguf.activation_quant import llama_cpp_activations
from tests.gguf.engine_logits import agreement, prefill_logits
from tests.gguf.peaked import greedy_files, peaked_files  # noqa: F401 (the fixtures)
from tests.gguf.reference import llama_cpp_logits

POSITIONS = 512
TOKENS = np.random.default_rng(0).integers(3, 384, POSITIONS).tolist()
CASES = [(m, f) for m in ("qwen3_moe", "qwen2_moe", "olmoe", "mixtral") for f in ("Q8_0", "Q4_K_M")]
# Wisp's own logits meet the targets (top-1 >= 99%, mean KL <= 0.01) on these. On qwen2_moe, whose shared
# expert adds a second quantized MLP per layer, llama.cpp's activation rounding moves more (measured top-1 / KL:
# Q8_0 98.0% / 0.011, Q4_K_M 97.5% / 0.051); the rounding reference closes the gap there as everywhere
# (>= 99.8% / <= 0.0004).
WISP_MEETS_TARGETS = {(m, f) for m in ("qwen3_moe", "olmoe", "mixtral") for f in ("Q8_0", "Q4_K_M")}


def greedy_tokens(path, backend: str, dense_weights: str = "auto") -> list[int]:
    options = EngineOptions(model=str(path), device="cpu", backend=backend, max_model_len=64,
                            dense_weights=dense_weights)
    with Engine(options) as engine:
        result = engine.generate(GenerateRequest(prompt_token_ids=tuple(TOKENS[:8]),
                                                 sampling=SamplingParams(max_tokens=32, ignore_eos=True)))
    return list(result.token_ids)


@pytest.mark.parametrize("dense_weights", ["dtype", "file"])  # dequantized at load, or kept in blocks
@pytest.mark.parametrize("model_type,ftype", CASES)
def test_greedy_tokens_equal_llama_cpps(model_type, ftype, dense_weights, greedy_files):
    path = greedy_files.quantized(model_type, ftype)
    ours = greedy_tokens(path, "wisp", dense_weights)
    assert len(set(ours)) > 4  # not stuck on one token
    assert ours == greedy_tokens(path, "llama.cpp")


@pytest.mark.parametrize("dense_weights", ["dtype", "file"])
@pytest.mark.parametrize("model_type,ftype", CASES)
def test_teacher_forced_logits_agree_with_llama_cpps(model_type, ftype, dense_weights, peaked_files):
    path = peaked_files.quantized(model_type, ftype)
    theirs = llama_cpp_logits(path, TOKENS)
    options = EngineOptions(model=str(path), device="cpu", backend="wisp", max_model_len=64,
                            dense_weights=dense_weights)
    with Engine(options) as engine:
        ours = prefill_logits(engine, TOKENS)
        with llama_cpp_activations(engine._core.runner.model, GgufModel(path).tensor_types()) as expert_calls:
            rounded = prefill_logits(engine, TOKENS)
    assert expert_calls[0] > 0  # the prefill took the per-expert path the reference rounds
    top1, kl = agreement(ours, theirs)
    rounded_top1, rounded_kl = agreement(rounded, theirs)
    print(f"{model_type} {ftype}: wisp top-1 {top1:.4f} KL {kl:.5f}; rounded top-1 {rounded_top1:.4f} "
          f"KL {rounded_kl:.6f}")
    assert rounded_top1 >= 0.99 and rounded_kl <= 0.01
    assert rounded_kl < kl  # llama.cpp's activation rounding is what separates the two
    if (model_type, ftype) in WISP_MEETS_TARGETS:
        assert top1 >= 0.99 and kl <= 0.01
