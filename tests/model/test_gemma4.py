"""Gemma 4 (gemma4): its config as published and as transformers saves it, the features refused by name, the planner's
bytes against the module tree, and the static decode path (what CUDA graphs capture) bitwise across expert modes.
Token-exactness against transformers and the dynamic path's expert modes: the shared runners (tests/tiny_models.py)."""

from __future__ import annotations

import copy

import pytest

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.errors import UnsupportedModelError
from engine.model.families import parse_config
from engine.model.families.gemma4 import read_config
from engine.model.latent_cache import new_kv_cache
from engine.model.loader import read_args
from engine.model.model_tree import meta_model
from engine.model.published_configs import GEMMA_4_26B_A4B
from engine.model.sizes import dense_params
from tests.experts.test_expert_modes import PROMPTS, mode_options

SAMPLING = SamplingParams(max_tokens=16, ignore_eos=True)


def published(**text_fields) -> dict:
    config = copy.deepcopy(GEMMA_4_26B_A4B)
    config["text_config"].update(text_fields)
    return config


def test_the_published_config_reads_as_the_26b_a4b():
    args = read_config(GEMMA_4_26B_A4B)
    spec = args.sandwich
    assert (args.num_experts, args.num_experts_per_tok, args.moe_intermediate_size) == (128, 8, 704)
    assert (args.num_key_value_heads, args.head_dim, spec.full_kv_heads, spec.full_head_dim) == (8, 256, 2, 512)
    assert spec.full_keys_are_values and spec.logit_softcap == 30.0 and spec.full_rope_fraction == 0.25
    assert (spec.sliding_rope_theta, spec.full_rope_theta) == (10_000.0, 1_000_000.0)
    assert args.layer_types.count("full_attention") == 5 and args.window(0) == 1024 and args.window(5) is None
    assert args.experts.activation == "gelu_tanh_glu" and args.tie_word_embeddings
    assert args.extra["vision_params"] > 0 and "warning" not in args.extra  # its tower (engine.vision.gemma4_tower)
    # bf16 K and V: 25 sliding layers of 8 x 256, 5 full layers of 2 x 512 (keys stored again as values)
    assert args.kv_bytes_per_token(2) == 25 * 2 * 8 * 256 * 2 + 5 * 2 * 2 * 512 * 2


def test_the_saved_per_layer_config_gives_the_same_full_layers(tiny_model_dir):
    """transformers writes per_layer_config instead of global_head_dim and num_global_key_value_heads."""
    import json

    folder = tiny_model_dir("gemma4")
    config = json.loads((folder / "config.json").read_text())
    assert "per_layer_config" in config["text_config"]
    spec = read_args(folder).sandwich
    assert (spec.full_kv_heads, spec.full_head_dim, spec.full_keys_are_values) == (1, 32, True)


@pytest.mark.parametrize("fields, named", [
    (dict(enable_moe_block=False), "enable_moe_block"),
    (dict(hidden_size_per_layer_input=256), "hidden_size_per_layer_input"),
    (dict(num_kv_shared_layers=4), "num_kv_shared_layers"),
    (dict(use_bidirectional_attention="all"), "use_bidirectional_attention"),
    (dict(hidden_activation="silu"), "hidden_activation"),
    (dict(rope_parameters={"sliding_attention": {"rope_type": "yarn", "rope_theta": 1.0}}), "yarn"),
])
def test_features_wisp_does_not_compute_are_refused_by_name(fields, named):
    with pytest.raises(UnsupportedModelError, match=named):
        parse_config(published(**fields))


@pytest.mark.parametrize("source", ["published", "tiny"])
def test_the_planners_dense_bytes_are_the_module_trees(tiny_model_dir, source):
    args = read_config(GEMMA_4_26B_A4B) if source == "published" else read_args(tiny_model_dir("gemma4"))
    tree = meta_model(args)
    assert dense_params(args) == sum(p.numel() for name, p in tree.named_parameters() if name != "lm_head.weight")


def test_the_kv_cache_holds_each_layer_kinds_shape(tiny_model_dir):
    import torch

    args = read_args(tiny_model_dir("gemma4"))
    cache = new_kv_cache(args, 16, torch.float32, "cpu")
    assert [tuple(k.shape[1:]) for k in cache.k] == [(2, 16), (2, 16), (1, 32)]
    assert sum(2 * k[0].numel() * 4 for k in cache.k) == args.kv_bytes_per_token(4)


def run_all(folder, **options):
    with Engine(EngineOptions(model=str(folder), device="cpu", max_model_len=128, **options)) as engine:
        single = engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=SAMPLING))
        batch = [h.result() for h in engine.submit_batch([GenerateRequest(prompt=p, sampling=SAMPLING)
                                                           for p in PROMPTS])]
    return [(r.token_ids, r.logprobs) for r in [single, *batch]]


def test_static_decode_is_bitwise_equal_across_expert_modes(tiny_model_dir):
    folder = tiny_model_dir("gemma4")
    args = read_args(folder)
    reference = run_all(folder, decode="static")
    for name, options in mode_options(args.num_experts_per_tok, args.num_experts).items():
        assert run_all(folder, decode="static", **options) == reference, name


def test_the_whole_step_path_is_bitwise_equal_to_the_host_pager(tiny_model_dir):
    """The path a whole-step CUDA graph captures (device LRU, routing ring), eagerly under Triton's interpreter, one
    layer per chunk: the sandwich layers' finish() on it gives the host pager's outputs."""
    pytest.importorskip("triton", reason="the device pager's kernels need Triton")
    from engine.runtime.decode_graphs import WholeStepOptions

    folder = tiny_model_dir("gemma4")

    def run(whole: bool):
        with Engine(EngineOptions(model=str(folder), device="cpu", max_model_len=128, decode="static",
                                  experts="paged", expert_slots=3)) as engine:
            engine._core.runner.padded_decode.set_whole_options(WholeStepOptions(chunk_layers=1, eager=whole))
            result = engine.generate(GenerateRequest(prompt=PROMPTS[0], sampling=SamplingParams(max_tokens=6,
                                                                                                 ignore_eos=True)))
            used = any(getattr(s, "whole_steps", 0) for s in engine._core.runner.padded_decode.by_batch.values())
        return (result.token_ids, result.logprobs), used

    (reference, _), (whole, used) = run(False), run(True)
    assert used and whole == reference


def test_the_router_gives_given_ids_the_weights_of_its_own_choice(tiny_model_dir):
    """Trace-driven benchmarks hand the router their ids (MoeContext.override): it weights them as its own."""
    import torch

    from engine.model.loader import load_weights

    router = load_weights(tiny_model_dir("gemma4"), torch.device("cpu"), "float32").model.layers[1].router
    x = torch.randn(5, router.proj.in_features, generator=torch.Generator().manual_seed(0))
    ids, weights = router(x)
    assert weights.dtype == torch.float32 and not torch.allclose(router.per_expert_scale, torch.ones(8))
    given_ids, given_weights = router(x, ids)
    assert torch.equal(given_ids, ids) and torch.equal(given_weights, weights)


def test_quantized_dense_weights_keep_the_router_float():
    """As llama.cpp keeps ffn_gate_inp: `--dense-quant` and benchmarks' quantized files leave the router unquantized."""
    from engine.quant.dense_file_types import dense_types

    args = read_config(GEMMA_4_26B_A4B)
    types = dense_types("Q4_K_M", meta_model(args), args)
    assert "layers.0.router.proj.weight" not in types and "layers.0.mlp.gate_proj.weight" in types
    assert "layers.5.self_attn.q_proj.weight" in types
