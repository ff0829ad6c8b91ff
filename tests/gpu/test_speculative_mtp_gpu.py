"""Drafting from the checkpoint's draft layer on CUDA (the lent GPU:
`pytest -m gpu -p no:xdist tests/gpu/test_speculative_mtp_gpu.py`): decode steps on CUDA graphs (their hidden states
copied out for the draft layer), verify steps and the draft layer eager; greedy token ids equal to decoding without
drafts in every expert mode, logprobs within 1e-4 in fp32; a draft layer that predicts the model is accepted."""

from __future__ import annotations

import pytest
import torch

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.model.loader import read_args
from tests.experts.test_expert_modes import mode_options
from tests.mtp_checkpoints import MTP_TYPES, write_mtp_model
from tests.tiny_models import write_tiny_model

pytestmark = pytest.mark.gpu
PROMPTS = ["def add(a, b):\n    return a + b\n", "one two three one two", "héllo wörld"]
GREEDY = SamplingParams(max_tokens=32, ignore_eos=True)


def run(folder, num_drafts: int | None = None, **options):
    """num_drafts: every step drafts this many (the draft-length rule bypassed), so acceptance measures the layer."""
    model = None if folder is None else str(folder)  # None: the bundled demo
    with Engine(EngineOptions(model=model, device="cuda", decode="graphs", **options)) as engine:
        if num_drafts is not None:
            engine._core.speculation.draft_length.choose = lambda: num_drafts
        results = [h.result() for h in engine.submit_batch([GenerateRequest(prompt=p, sampling=GREEDY)
                                                            for p in PROMPTS])]
    assert all(r.error is None for r in results), [r.error for r in results]
    return [(list(r.token_ids), list(r.logprobs)) for r in results], \
        sum(r.stats.spec_proposed for r in results), sum(r.stats.spec_accepted for r in results)


@pytest.mark.parametrize("copying", [False, True], ids=["random", "copying"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("model_type", MTP_TYPES)
def test_mtp_drafting_is_lossless_on_cuda_in_every_expert_mode(tmp_path, model_type, dtype, copying):
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    tiny = write_tiny_model(tmp_path / "tiny", model_type, dtype=dtype)
    folder = write_mtp_model(tiny, tmp_path / "mtp", model_type, copying)
    args = read_args(folder)
    modes = {"resident": {}, **mode_options(args.num_experts_per_tok, args.num_experts)}
    if copying:  # its experts compute zeros (the copying model's down projections): two modes say enough
        modes = {name: modes[name] for name in ("resident", "paged-top_k")}
    plain, _, _ = run(folder)
    for mode, options in modes.items():
        drafted, proposed, accepted = run(folder, speculative="mtp", **options)
        assert proposed > 0, mode
        if copying:
            assert accepted >= 0.5 * proposed, mode
        for (ids, logprobs), (plain_ids, plain_logprobs) in zip(drafted, plain, strict=True):
            assert ids == plain_ids, mode
            if dtype == torch.float32:
                assert logprobs == pytest.approx(plain_logprobs, abs=1e-4), mode


def test_the_demos_draft_layer_is_lossless_on_cuda():
    """The bundled demo's trained draft layer (bf16, resources/demo_model/mtp.safetensors) on CUDA graphs."""
    assert torch.cuda.is_available(), "GPU tests need CUDA"
    plain, _, _ = run(None)
    drafted, proposed, accepted = run(None, 2, speculative="mtp")
    assert [ids for ids, _ in drafted] == [ids for ids, _ in plain]
    assert proposed > 0 and accepted >= 0.2 * proposed  # 57 of 116 on the CPU
