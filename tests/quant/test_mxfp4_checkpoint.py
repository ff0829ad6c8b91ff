"""gpt-oss checkpoints with MXFP4 experts (tests/quant/mxfp4_models) on Wisp's engine: the experts stay MXFP4 in
the store and in slots, generations match transformers on the same model with dense experts (their exact
values), and are bitwise identical resident, statically offloaded and paged."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from engine.api import Engine, EngineOptions, GenerateRequest
from engine.errors import UnsupportedModelError
from engine.model.config_file import read_args
from engine.model.loader import load_weights
from engine.model.sizes import model_sizes
from engine.quant.layout import QuantLayout
from engine.model.checkpoint_quant import expert_quant
from tests.experts.test_expert_modes import GREEDY, PROMPTS, mode_options, outputs
from tests.quant.mxfp4_models import write_mxfp4_pair
from tests.tiny_models import write_tiny_model


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(MXFP4 checkpoint, the same model with dense experts)."""
    root = tmp_path_factory.mktemp("mxfp4")
    return write_mxfp4_pair(write_tiny_model(root / "dense", "gpt_oss"), root / "mxfp4", root / "reference")


def test_experts_stay_mxfp4(pair):
    mxfp4, _ = pair
    weights = load_weights(mxfp4, torch.device("cpu"), "auto")
    layout = weights.store.layout
    assert isinstance(layout, QuantLayout) and {f.types for f in layout.formats.values()} == {("MXFP4",) * 3}
    args = weights.args
    D, I = args.hidden_size, args.moe_intermediate_size
    assert layout.expert_bytes == model_sizes(args, 4).expert_bytes < 3 * D * I  # ~0.53 bytes per weight, padded
    assert weights.store.blocks[0].dtype == torch.uint8
    assert model_sizes(read_args(mxfp4), 4).dense_bytes == model_sizes(read_args(pair[1]), 4).dense_bytes


def test_greedy_tokens_match_transformers_on_the_dense_twin(pair):
    from transformers import AutoModelForCausalLM

    mxfp4, reference = pair
    with Engine(EngineOptions(model=str(mxfp4), device="cpu")) as engine:
        ids = engine._core.tokenizer.encode(PROMPTS[0])
        result = engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=GREEDY))
    model = AutoModelForCausalLM.from_pretrained(reference, dtype=torch.float32).eval()
    with torch.inference_mode():
        out = model.generate(torch.tensor([ids]), max_new_tokens=GREEDY.max_tokens, min_new_tokens=GREEDY.max_tokens,
                             do_sample=False, eos_token_id=None, pad_token_id=0)
    assert list(result.token_ids) == out[0, len(ids):].tolist()
    assert len(set(result.token_ids)) > 3


def test_generations_match_the_dense_twin(pair):
    mxfp4, reference = pair
    ours, dense = outputs(mxfp4), outputs(reference)
    assert [ids for ids, _ in ours] == [ids for ids, _ in dense]
    # the same weights; only the order of the fp32 sums differs (gathered GEMV vs batched matmul)
    np.testing.assert_allclose(np.concatenate([lp for _, lp in ours]), np.concatenate([lp for _, lp in dense]),
                               rtol=1e-4, atol=1e-4)


def test_every_expert_mode_is_bitwise_resident(pair):
    mxfp4, _ = pair
    args = read_args(mxfp4)
    reference = outputs(mxfp4, experts="resident")
    for name, options in mode_options(args.num_experts_per_tok, args.num_experts).items():
        assert outputs(mxfp4, **options) == reference, name


def test_other_quantizations_are_refused_by_name(pair):
    config = json.loads((pair[0] / "config.json").read_text())
    assert expert_quant(config) == "MXFP4" and expert_quant({}) == ""
    with pytest.raises(UnsupportedModelError, match="quantization 'gptq'"):
        expert_quant({"quantization_config": {"quant_method": "gptq"}})
