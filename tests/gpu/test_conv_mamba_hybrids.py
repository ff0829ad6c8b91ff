"""The short-conv (lfm2_moe) and Mamba-2 (nemotron_h) hybrids on CUDA:
`pytest -m gpu tests/gpu/test_conv_mamba_hybrids.py`. They fail (not skip) without a GPU. tests/gpu/test_cuda.py's
shared runner covers them too (bf16 against transformers, every expert mode bitwise); these add fp32 token-exact
against transformers across the Mamba chunks, and the CUDA-graph decode against the dynamic one, batched, in every
expert mode."""

from __future__ import annotations

import pytest
import torch

from engine.api import Engine, EngineOptions, GenerateRequest
from engine.model.loader import read_args
from tests.experts.test_expert_modes import mode_options
from tests.gpu.test_hybrid import PROMPTS, greedy, model_dir, outputs  # noqa: F401 (model_dir: the fixture)
from tests.model.test_hybrid import LONG_PROMPT

pytestmark = pytest.mark.gpu
TYPES = ("lfm2_moe", "nemotron_h")


@pytest.mark.parametrize("model_type", TYPES)
@pytest.mark.parametrize("prompt", [PROMPTS[0], LONG_PROMPT], ids=["short", "long"])
def test_fp32_greedy_tokens_match_transformers_on_cuda(model_dir, model_type, prompt):  # noqa: F811
    from transformers import AutoModelForCausalLM

    folder = model_dir(model_type, torch.float32)
    with Engine(EngineOptions(model=str(folder), device="cuda", dtype="float32")) as engine:
        ids = engine._core.tokenizer.encode(prompt)
        ours = engine.generate(GenerateRequest(prompt=prompt, sampling=greedy())).token_ids
    reference = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).cuda().eval()
    with torch.inference_mode():
        out = reference.generate(torch.tensor([ids], device="cuda"), max_new_tokens=32, min_new_tokens=32,
                                 do_sample=False, eos_token_id=None, pad_token_id=0)
    assert list(ours) == out[0, len(ids):].tolist()


@pytest.mark.parametrize("model_type", TYPES)
def test_graph_decode_gives_the_dynamic_paths_tokens_and_the_same_bits_in_every_expert_mode(model_dir,  # noqa: F811
                                                                                           model_type):
    exact = model_dir(model_type, torch.float32)
    dynamic = outputs(exact, experts="resident", decode="dynamic", dtype="float32")
    graphed = outputs(exact, experts="resident", decode="graphs", dtype="float32")
    assert [ids for ids, _ in graphed] == [ids for ids, _ in dynamic]
    folder = model_dir(model_type, torch.bfloat16)
    args = read_args(folder)
    reference = outputs(folder, experts="resident", decode="graphs")
    assert outputs(folder, experts="resident", decode="graphs") == reference, "not repeatable"
    for name, options in mode_options(args.num_experts_per_tok, args.num_experts).items():
        assert outputs(folder, decode="graphs", **options) == reference, name
