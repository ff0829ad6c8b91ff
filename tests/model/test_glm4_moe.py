"""glm4_moe beyond the shared runner (tests/model/test_models.py and test_expert_modes.py run it too): the CLI's
JSON against transformers, GLM-4.5-Air's own settings, both config spellings, the weights of overridden ids
(trace-driven benchmarks), and the plan that counts shared experts and the first dense layers as dense weights."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.loading.catalog import budget_marks, engine_plan, fit_summary
from engine.cli import main
from engine.errors import ModelFormatError, UnsupportedModelError
from engine.experts.providers.resident import ResidentExperts
from engine.model.config_file import read_args
from engine.model.loader import load_weights
from engine.model.families import parse_config
from engine.model.shared_expert_args import SharedExpertArgs
from engine.model.sizes import model_sizes
from engine.model.transformer import MoeContext
from engine.text.tokenizer import Tokenizer
from tests.model.test_models import PROMPTS, hf_reference, prompt_logits
from tests.tiny_models import write_tiny_model

CPU = torch.device("cpu")


def transformers_greedy(folder, ids: list[int], max_tokens: int) -> list[int]:
    with torch.inference_mode():
        out = hf_reference(folder).generate(torch.tensor([ids]), max_new_tokens=max_tokens, min_new_tokens=max_tokens,
                                            do_sample=False, eos_token_id=None, pad_token_id=0)
    return out[0, len(ids):].tolist()


def cli_json(capsys, folder, *options: str) -> dict:
    capsys.readouterr()
    assert main(["run", str(folder), "--prompt", PROMPTS[0], "--max-tokens", "24", "--device", "cpu", "--json",
                 *options]) == 0
    return json.loads(capsys.readouterr().out)


def test_wisp_run_json_is_token_exact_against_transformers_in_every_expert_mode(tiny_model_dir, capsys):
    folder = tiny_model_dir("glm4_moe")
    resident = cli_json(capsys, folder)
    ids = Tokenizer.from_folder(folder).encode(PROMPTS[0])
    assert resident["token_ids"] == transformers_greedy(folder, ids, 24)
    for options in (["--experts", "static"], ["--experts", "paged", "--expert-slots", "2"],
                    ["--experts", "paged", "--expert-slots", "5"]):
        other = cli_json(capsys, folder, *options)
        assert (other["token_ids"], other["logprobs"]) == (resident["token_ids"], resident["logprobs"]), options


@pytest.fixture(scope="module")
def air_like(tmp_path_factory):
    """GLM-4.5-Air's own router settings (one group, factor 1), with the per-head q/k norm GLM-4.5 can switch on."""
    return write_tiny_model(tmp_path_factory.mktemp("air"), "glm4_moe", seed=3, n_group=1, topk_group=1,
                            routed_scaling_factor=1.0, use_qk_norm=True)


def test_air_settings_with_qk_norm_match_transformers(air_like):
    args = read_args(air_like)
    assert (args.router.n_group, args.attention.qk_norm, args.router.routed_scaling_factor) == (1, "per_head", 1.0)
    ids = Tokenizer.from_folder(air_like).encode(PROMPTS[1])
    with torch.inference_mode():
        reference = hf_reference(air_like)(torch.tensor([ids])).logits[0].float()
    assert (prompt_logits(air_like, ids) - reference).abs().max().item() < 1e-4
    with Engine(EngineOptions(model=str(air_like), device="cpu")) as engine:
        ours = engine.generate(GenerateRequest(prompt=PROMPTS[1], sampling=SamplingParams(max_tokens=16, ignore_eos=True)))
    assert list(ours.token_ids) == transformers_greedy(air_like, ids, 16)


def test_both_config_spellings_and_the_rope_default_read_as_transformers_reads_them(tiny_model_dir):
    from transformers import Glm4MoeConfig

    hub = json.loads((tiny_model_dir("glm4_moe") / "config.json").read_text())
    args = parse_config(hub)
    assert (args.rotary_dim, args.moe_layers, args.shared_experts.n_shared_experts) == (16, (False, True, True), 1)
    nested = {key: value for key, value in hub.items() if key not in ("rope_theta", "partial_rotary_factor")}
    nested["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}
    assert parse_config(nested) == args  # as transformers 5 writes it
    unstated = {key: value for key, value in hub.items() if key != "partial_rotary_factor"}
    default = Glm4MoeConfig(**unstated).rope_parameters["partial_rotary_factor"]
    assert parse_config(unstated).attention.partial_rotary_factor == default == 0.5


@pytest.mark.parametrize("change,error,words", [
    ({"n_group": 3}, ModelFormatError, "n_group=3 must divide the 8"),
    ({"topk_group": 3}, ModelFormatError, "topk_group=3 must be between 1 and n_group=2"),
    ({"num_experts_per_tok": 5}, ModelFormatError, "num_experts_per_tok=5 is more than the 4 experts"),
    ({"n_routed_experts": None}, ModelFormatError, "'n_routed_experts' is missing"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, UnsupportedModelError, "'yarn'"),
])
def test_config_errors_name_the_field(tiny_model_dir, change, error, words):
    config = {**json.loads((tiny_model_dir("glm4_moe") / "config.json").read_text()), **change}
    with pytest.raises(error, match=words):
        parse_config(config)


def test_overridden_ids_get_the_routers_own_weights(tiny_model_dir):
    weights = load_weights(tiny_model_dir("glm4_moe"), CPU, "float32")
    block = weights.model.layers[1].mlp
    x = torch.randn(7, weights.args.hidden_size, generator=torch.Generator().manual_seed(0))
    context = MoeContext(ResidentExperts(weights.store))
    with torch.inference_mode():
        ids, routed, _ = block.route(x, context)
        same_ids, overridden, _ = block.route(x, MoeContext(context.experts, override=lambda layer: ids))
    assert torch.equal(same_ids, ids) and torch.equal(overridden, routed) and routed.dtype == torch.float32


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_the_planned_dense_bytes_are_the_loaded_ones(tiny_model_dir, dtype):
    """Shared experts and the first dense layer's MLP are dense weights; the routers stay fp32 in a bf16 model."""
    weights = load_weights(tiny_model_dir("glm4_moe"), CPU, dtype)
    loaded = sum(p.numel() * p.element_size() for p in weights.model.parameters())
    assert model_sizes(weights.args, weights.dtype.itemsize).dense_bytes == loaded
    assert weights.model.layers[1].mlp.gate.weight.dtype == torch.float32
    assert weights.model.layers[1].mlp.shared.shared_experts.gate_proj.weight.dtype == weights.dtype


def test_the_picker_counts_shared_experts_as_dense(tiny_model_dir, tmp_path):
    folder = tiny_model_dir("glm4_moe")
    args = read_args(folder)
    unshared = tmp_path / "unshared"
    unshared.mkdir()
    config = json.loads((folder / "config.json").read_text())
    (unshared / "config.json").write_text(json.dumps({**config, "n_shared_experts": 0}))
    shared_bytes = args.num_moe_layers * 3 * args.hidden_size * args.moe_intermediate_size * 2
    bf16 = dict(device="cpu", dtype="bfloat16", max_num_seqs=1)
    with_shared, without = (engine_plan(EngineOptions(model=str(f), **bf16)) for f in (folder, unshared))
    assert with_shared.dense_bytes - without.dense_bytes == shared_bytes
    assert with_shared.expert_bytes == without.expert_bytes == args.expert_numel * 2  # routed experts only
    marks, unshared_marks = (budget_marks(EngineOptions(model=str(f), device="cpu", experts="paged"))
                             for f in (folder, unshared))
    assert marks.minimum - unshared_marks.minimum == 2 * shared_bytes  # fp32 on the CPU
    assert fit_summary(EngineOptions(model=str(folder), device="cpu", budget_bytes=marks.all_resident)) == "fits"
    below = EngineOptions(model=str(folder), budget_bytes=with_shared.total_bytes - 1, **bf16)
    assert fit_summary(below).startswith("pages experts")


def test_sizes_of_a_glm_4_5_air_shape():
    """GLM-4.5-Air's published config: 128 routed experts of 1408, one shared, the first layer dense (10944)."""
    air = dict(model_type="glm4_moe", vocab_size=151552, hidden_size=4096, num_hidden_layers=46,
               num_attention_heads=96, num_key_value_heads=8, head_dim=128, n_routed_experts=128, n_shared_experts=1,
               num_experts_per_tok=8, moe_intermediate_size=1408, intermediate_size=10944, first_k_dense_replace=1,
               n_group=1, topk_group=1, routed_scaling_factor=1.0, norm_topk_prob=True, attention_bias=True,
               partial_rotary_factor=0.5, rope_theta=1000000, rms_norm_eps=1e-5, use_qk_norm=False,
               max_position_embeddings=131072, tie_word_embeddings=False, torch_dtype="bfloat16")
    args = parse_config(air)
    sizes = model_sizes(args, 2)
    assert (args.num_moe_layers, args.rotary_dim, sizes.expert_bytes) == (45, 64, 3 * 4096 * 1408 * 2)
    routed = 45 * 128 * 3 * 4096 * 1408
    total_params = (sizes.dense_bytes - 45 * (128 * 4096 + 128) * 2) // 2 + routed  # routers at fp32: 4 bytes
    assert 106e9 < total_params < 108e9  # GLM-4.5-Air: 106B parameters (its MTP layer is not loaded)
    without_shared = model_sizes(replace(args, shared_experts=SharedExpertArgs()), 2)
    assert sizes.dense_bytes - without_shared.dense_bytes == 45 * 3 * 4096 * 1408 * 2


def test_a_bf16_models_router_routes_as_transformers_fp32_router(tiny_model_dir):
    """transformers keeps the router (weight and correction bias) in fp32 in a bf16 model; so does the loader."""
    from transformers import AutoModelForCausalLM

    folder = tiny_model_dir("glm4_moe")
    ours = load_weights(folder, CPU, "bfloat16").model.layers[2].mlp
    reference = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16).model.layers[2].mlp.gate
    x = torch.randn(64, ours.args.hidden_size, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    with torch.inference_mode():
        ids, weights, _ = ours.route(x, MoeContext(experts=None))
        _, reference_weights, reference_ids = reference(x)
    assert torch.equal(ids, reference_ids) and torch.equal(weights, reference_weights)


def test_a_recorded_trace_holds_the_routing_wisp_runs(tiny_model_dir, tmp_path, capsys):
    """`wisp trace record` reads the routers' own choice (biased, grouped top-k) for the MoE layers only."""
    from engine.traces import format as trace_format

    folder = tiny_model_dir("glm4_moe")
    (tmp_path / "prompts.json").write_text(json.dumps([PROMPTS[0]]))
    assert main(["trace", "record", str(folder), "--prompts", str(tmp_path / "prompts.json"), "--out",
                 str(tmp_path / "t.npz"), "--max-tokens", "6"]) == 0
    trace = trace_format.load(tmp_path / "t.npz")
    assert trace.header.num_layers == 2 and trace.num_tokens.tolist()[1:] == [1] * 5
    routed = {1: [], 2: []}
    with Engine(EngineOptions(model=str(folder), device="cpu")) as engine:
        engine._core.runner.routing_observer = lambda layer, ids: routed[layer].append(ids)
        engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=SamplingParams(max_tokens=6, ignore_eos=True)))
    for column, layer in enumerate((1, 2)):
        ours = torch.cat(routed[layer])[: trace.expert_ids.shape[0]].sort(dim=-1).values
        assert ours.tolist() == torch.from_numpy(trace.expert_ids[:, column].astype("int64")).sort(dim=-1).values.tolist()
