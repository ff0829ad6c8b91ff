"""gpt-oss GGUF files (llama.cpp's "gpt-oss" architecture) written by `wisp convert-gguf` (tests/gguf/gpt_oss_files)
on Wisp's engine: the file's metadata gives the checkpoint's ModelArgs; llama.cpp runs the f32 file as transformers
runs the checkpoint, and so does Wisp; llama.cpp's MXFP4_MOE file runs as llama.cpp runs it (llama.cpp rounds
activations to Q8_0 blocks before its MXFP4 and Q8_0 matmuls, Wisp multiplies them as they are), bitwise identical
in every expert mode; a file whose MXFP4 experts were repacked from a checkpoint's blocks computes exactly what that
checkpoint computes, on any CPU; a checkpoint llama.cpp's graph would compute differently is refused."""

from __future__ import annotations

from operator import attrgetter

import numpy as np
import pytest
import torch

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.errors import UnsupportedModelError
from engine.gguf.convert import convert
from engine.gguf.model_file import GgufModel
from engine.model.config_file import read_args
from tests.gguf.engine_logits import agreement, prefill_logits
from tests.gguf.engine_runs import assert_every_mode_is_bitwise_resident, outputs
from tests.gguf.gpt_oss_files import gpt_oss_files, gpt_oss_greedy_files  # noqa: F401 (the fixtures)
from tests.gguf.reference import llama_cpp_logits
from tests.tiny_models import write_tiny_model

TOKENS = np.random.default_rng(1).integers(3, 384, 96).tolist()  # crosses the sliding window (8) many times
GPT_OSS_FIELDS = ("attention", "router", "experts.bias", "experts.activation", "experts.swiglu_alpha",
                  "experts.swiglu_limit", "norm_weight_fp32", "rope_scaling", "rope_theta", "head_dim", "num_experts",
                  "num_experts_per_tok", "moe_intermediate_size", "moe_layers")


def transformers_logits(folder, token_ids) -> np.ndarray:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.inference_mode():
        return model(torch.tensor([token_ids])).logits[0].numpy()


def wisp_logits(path, token_ids) -> np.ndarray:
    with Engine(EngineOptions(model=str(path), device="cpu", backend="wisp", max_model_len=128)) as engine:
        return prefill_logits(engine, token_ids)


def test_metadata_gives_the_checkpoints_args(gpt_oss_files):
    path = gpt_oss_files.quantized()
    model, args = GgufModel(path), read_args(gpt_oss_files.folder())
    ok, reason = model.support()
    assert ok and "MXFP4" in reason, reason
    for name in GPT_OSS_FIELDS:
        assert attrgetter(name)(model.args) == attrgetter(name)(args), name
    layer = model.expert_layers()[0]
    assert (layer.gate.type_name, layer.up.type_name, layer.down.type_name) == ("MXFP4",) * 3


def test_converted_file_is_what_llama_cpp_runs_as_the_checkpoint(gpt_oss_files):
    """`wisp convert-gguf` writes llama.cpp's layout: llama.cpp on the f32 file agrees with transformers."""
    path, folder = gpt_oss_files.converted(), gpt_oss_files.folder()
    top1, kl = agreement(llama_cpp_logits(path, TOKENS), transformers_logits(folder, TOKENS))
    assert top1 >= 0.99 and kl < 1e-3, (top1, kl)


def test_f32_file_runs_as_transformers(gpt_oss_files):
    path, folder = gpt_oss_files.converted(), gpt_oss_files.folder()
    ours, reference = wisp_logits(path, TOKENS), transformers_logits(folder, TOKENS)
    np.testing.assert_allclose(ours, reference, rtol=1e-4, atol=1e-4 * np.abs(reference).max())


def test_mxfp4_moe_logits_agree_with_llama_cpps(gpt_oss_files):
    path = gpt_oss_files.quantized()
    top1, kl = agreement(wisp_logits(path, TOKENS), llama_cpp_logits(path, TOKENS))
    print(f"gpt-oss MXFP4_MOE: wisp top-1 {top1:.4f} KL {kl:.5f}")
    assert top1 >= 0.99 and kl <= 0.01


def test_greedy_tokens_equal_llama_cpps(gpt_oss_greedy_files):
    path = gpt_oss_greedy_files.quantized()

    def greedy(backend: str) -> list[int]:
        options = EngineOptions(model=str(path), device="cpu", backend=backend, max_model_len=64)
        with Engine(options) as engine:
            result = engine.generate(GenerateRequest(prompt_token_ids=tuple(TOKENS[:8]),
                                                     sampling=SamplingParams(max_tokens=32, ignore_eos=True)))
        return list(result.token_ids)

    ours = greedy("wisp")
    assert len(set(ours)) > 4
    assert ours == greedy("llama.cpp")


def test_every_expert_mode_is_bitwise_resident(gpt_oss_files):
    assert_every_mode_is_bitwise_resident(gpt_oss_files.quantized())


def test_repacked_file_computes_what_the_mxfp4_checkpoint_does(gpt_oss_files):
    """Experts repacked from the checkpoint's blocks as llama.cpp's converter repacks them: the same slot bytes,
    the same dense weights, so the same bits out, on every CPU. That needs the dense weights at the same
    alignment too: MKL's GEMM on AVX and SSE code paths (as on AMD processors) gives other bits for an operand
    at another alignment, and a checkpoint's tensors come 8-byte aligned from the memory-mapped file, so both
    loaders copy them into torch's 64-byte aligned memory (MKL_ENABLE_INSTRUCTIONS=AVX shows it here)."""
    path, (checkpoint, _) = gpt_oss_files.repacked(), gpt_oss_files.mxfp4_pair()
    assert dense_alignments(path) == dense_alignments(checkpoint) == {0}
    assert outputs(path) == outputs(checkpoint)


def dense_alignments(path) -> set[int]:
    """The data addresses of the loaded model's dense parameters, modulo 64."""
    with Engine(EngineOptions(model=str(path), device="cpu", backend="wisp", max_model_len=16)) as engine:
        return {p.data_ptr() % 64 for p in engine._core.runner.model.parameters()}


def test_a_checkpoint_with_other_swiglu_constants_is_refused(tmp_path):
    folder = write_tiny_model(tmp_path / "limit", "gpt_oss")  # its SwiGLU limit is 1.5
    with pytest.raises(UnsupportedModelError, match="swiglu_limit 1.5.*different model"):
        convert(folder, tmp_path / "limit.gguf", "f32")
    assert not (tmp_path / "limit.gguf").exists()
