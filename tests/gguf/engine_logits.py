"""All-position logits of Wisp's engine on a GGUF file: one prefill through the engine's own model and expert
provider (the compute `wisp run` uses), and the teacher-forced comparison numbers against llama.cpp."""

from __future__ import annotations

import numpy as np
import torch

from engine.model.attention import AttentionMetadata, SeqSpan
from engine.model.latent_cache import new_kv_cache
from engine.model.transformer import MoeContext
from engine.quant.quant_modules import embedding_place


def prefill_logits(engine, token_ids: list[int]) -> np.ndarray:
    """fp32 logits [len(token_ids), vocab] of one prefill with the engine's model and expert provider (a KV cache
    of its own, so the engine's pool is untouched)."""
    runner = engine._core.runner
    args, n = runner.model.args, len(token_ids)
    _, dtype = embedding_place(runner.model.embed_tokens)
    cache = new_kv_cache(args, n, dtype, runner.device)  # hybrids: KV of the full-attention layers, one state
    rows = torch.arange(n, device=runner.device)
    meta = AttentionMetadata(slot_mapping=rows, spans=[SeqSpan(0, n, rows, state_slot=0)])
    with torch.inference_mode():
        runner.experts.begin_step(True)
        hidden = runner.model(torch.tensor(token_ids, device=runner.device), rows, meta, cache,
                              MoeContext(runner.experts))
        return runner.model.logits(hidden).cpu().numpy()


def agreement(ours: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    """(top-1 agreement, mean KL(reference || ours) in nats) over positions."""
    log_ours = torch.log_softmax(torch.from_numpy(ours).double(), -1)
    log_ref = torch.log_softmax(torch.from_numpy(reference).double(), -1)
    kl = (log_ref.exp() * (log_ref - log_ours)).sum(-1).mean().item()
    return float((ours.argmax(-1) == reference.argmax(-1)).mean()), kl


def file_logits(path, token_ids: list[int], rounded: bool = False) -> np.ndarray:
    """prefill_logits of a fresh CPU engine on the GGUF file at path; rounded: with llama.cpp's activation rounding
    before every quantized matmul (tests/gguf/activation_quant)."""
    from engine.api import Engine, EngineOptions
    from engine.gguf.model_file import GgufModel
    from tests.gguf.activation_quant import llama_cpp_activations

    with Engine(EngineOptions(model=str(path), device="cpu", backend="wisp", max_model_len=64)) as engine:
        if not rounded:
            return prefill_logits(engine, token_ids)
        with llama_cpp_activations(engine._core.runner.model, GgufModel(path).tensor_types()):
            return prefill_logits(engine, token_ids)


def assert_reads_as_llama_cpp_computes_its_weights(path, token_ids: list[int], scratch) -> None:
    """Wisp's logits of the file at path against llama.cpp's on a dequantized copy of it (written under scratch): the
    weights read alike, so the logits agree within 1e-3 of their range and pick the same tokens."""
    from tests.gguf.reference import dequantized_copy, llama_cpp_logits

    theirs = llama_cpp_logits(dequantized_copy(path, scratch / "dequantized.gguf"), token_ids)
    ours = file_logits(path, token_ids)
    assert np.abs(ours - theirs).max() < 1e-3 * np.abs(theirs).max()
    assert (ours.argmax(-1) == theirs.argmax(-1)).all()
