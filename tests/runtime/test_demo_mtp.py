"""The bundled demo's draft layer (resources/demo_model/mtp.safetensors, trained by training.train_mtp): read from its
own file beside model.safetensors, counted by the plan, accepted often, and lossless (greedy ids as off)."""

import json

import pytest
from safetensors import safe_open

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.loading.model_path import DEMO_MODEL

GREEDY = SamplingParams(max_tokens=48, ignore_eos=True)


def code_prompts() -> list[str]:
    return json.loads((DEMO_MODEL.parents[1] / "resources" / "traces" / "workloads.json").read_text())["code"][:2]


def generate(mode: str):
    """(token ids and logprobs of each code prompt, proposed, accepted, the plan, the loaded draft layer's bytes)."""
    with Engine(EngineOptions(device="cpu", speculative=mode)) as engine:
        results = [engine.generate(GenerateRequest(prompt=p, sampling=GREEDY)) for p in code_prompts()]
        plan, loaded = engine.info.plan, 0
        if mode == "mtp":
            draft = engine._core.speculation.drafter.draft
            loaded = sum(p.numel() * p.element_size() for p in draft.layer.parameters())
            loaded += draft.experts.blocks.numel() * draft.experts.blocks.element_size()
        assert engine.has_draft_layers
    outputs = [(list(r.token_ids), list(r.logprobs)) for r in results]
    return outputs, sum(r.stats.spec_proposed for r in results), sum(r.stats.spec_accepted for r in results), plan, \
        loaded


def test_the_draft_layer_is_its_own_file():
    with safe_open(str(DEMO_MODEL / "mtp.safetensors"), "pt") as draft:
        names = set(draft.keys())
    with safe_open(str(DEMO_MODEL / "model.safetensors"), "pt") as model:
        assert not any(name.startswith("mtp.") for name in model.keys())
    assert "mtp.fc.weight" in names and "mtp.layers.0.mlp.experts.15.down_proj.weight" in names
    assert (DEMO_MODEL / "mtp.safetensors").stat().st_size <= 4 * 1024 * 1024
    assert json.loads((DEMO_MODEL / "config.json").read_text())["mtp_num_hidden_layers"] == 1


def test_the_demo_drafts_from_its_layer_losslessly_and_the_plan_counts_it():
    plain, proposed, _, off_plan, _ = generate("off")
    assert proposed == 0
    drafted, proposed, accepted, mtp_plan, loaded = generate("mtp")
    for (ids, logprobs), (plain_ids, plain_logprobs) in zip(drafted, plain, strict=True):
        assert ids == plain_ids
        assert logprobs == pytest.approx(plain_logprobs, abs=1e-4)
    assert proposed > 0 and accepted >= 0.2 * proposed  # a trained layer, not a random one (which gets ~0)
    assert mtp_plan.dense_bytes - off_plan.dense_bytes == loaded
    assert mtp_plan.kv_block_bytes * 8 == off_plan.kv_block_bytes * 9  # one more attention layer of 8


def test_transformers_reads_the_demo_as_before(tmp_path):
    """model.safetensors is the shipped one, and config.json's draft-layer key changes nothing transformers
    computes (it loads model.safetensors alone and keeps the key as an unused attribute)."""
    import hashlib

    import torch
    from transformers import AutoModelForCausalLM

    digest = hashlib.sha256((DEMO_MODEL / "model.safetensors").read_bytes()).hexdigest()
    assert digest.startswith("30a32a42")  # MODEL_CARD.md
    config = json.loads((DEMO_MODEL / "config.json").read_text())
    del config["mtp_num_hidden_layers"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors").symlink_to(DEMO_MODEL / "model.safetensors")
    ids = torch.tensor([[5, 17, 3, 99, 42, 7, 7, 64, 8, 21]])
    with torch.no_grad():
        logits = [AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()(ids).logits
                  for folder in (DEMO_MODEL, tmp_path)]
    torch.testing.assert_close(logits[0], logits[1], atol=0, rtol=0)
