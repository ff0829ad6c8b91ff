"""Multi-head latent attention (deepseek_v2, deepseek_v3): `wisp run --json` against transformers in every expert
mode, the KV cache holding the compressed rows (and sized for them by the planner), YaRN with DeepSeek's softmax
correction, the published configs' shapes."""

from __future__ import annotations

import json

import pytest
import torch

from engine.api import Engine, EngineOptions
from engine.experts.providers.resident import ResidentExperts
from engine.model.attention import AttentionMetadata, SeqSpan
from engine.model.latent_cache import LatentKVCache, new_kv_cache
from engine.model.loader import load_weights, read_args
from engine.model.families import parse_config
from engine.model.sizes import dense_params, model_sizes
from engine.model.transformer import MoeContext
from engine.text.tokenizer import Tokenizer
from tests.model.test_models import hf_reference
from tests.tiny_models import write_tiny_model

MLA_TYPES = ["deepseek_v2", "deepseek_v3"]
PROMPT = "def fib(n):"


def cli_run(folder, capsys, *options: str) -> dict:
    from engine.cli import main

    capsys.readouterr()
    code = main(["run", str(folder), "--prompt", PROMPT, "--max-tokens", "12", "--device", "cpu", "--json", *options])
    assert code == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("model_type", MLA_TYPES)
def test_wisp_run_json_matches_transformers_and_every_expert_mode(tiny_model_dir, model_type, capsys):
    folder = tiny_model_dir(model_type)
    resident = cli_run(folder, capsys, "--decode", "dynamic")
    ids = torch.tensor([Tokenizer.from_folder(folder).encode(PROMPT)])
    with torch.inference_mode():
        ref = hf_reference(folder).generate(ids, max_new_tokens=12, do_sample=False, pad_token_id=0)
    tokens = resident["token_ids"]
    assert 1 <= len(tokens) and tokens == ref[0, ids.shape[1]:].tolist()[: len(tokens)]
    num_experts = read_args(folder).num_experts
    for decode in ("dynamic", "static"):  # static: the padded path CUDA graphs capture, run eagerly
        reference = cli_run(folder, capsys, "--decode", decode)
        assert reference["token_ids"] == tokens
        for experts in (["static"], ["paged", "--expert-slots", "2"], ["paged", "--expert-slots", str(num_experts)]):
            run = cli_run(folder, capsys, "--decode", decode, "--experts", *experts)
            assert (run["token_ids"], run["logprobs"]) == (tokens, reference["logprobs"]), (decode, experts)


def engine_prefill(folder, ids: list[int]):
    """Wisp's all-position logits of one prefill and the cache it wrote."""
    weights = load_weights(folder, torch.device("cpu"), "float32")
    cache = new_kv_cache(weights.args, 64, torch.float32, "cpu")
    n = len(ids)
    meta = AttentionMetadata(slot_mapping=torch.arange(n), spans=[SeqSpan(0, n, torch.arange(n))])
    with torch.inference_mode():
        hidden = weights.model(torch.tensor(ids), torch.arange(n), meta, cache, MoeContext(ResidentExperts(weights.store)))
        return weights.model.logits(hidden), cache


@pytest.mark.parametrize("model_type", MLA_TYPES)
def test_the_cache_holds_transformers_compressed_rows(tiny_model_dir, model_type):
    """Each token's row is transformers' cached latent: normed c_kv then rotated k_pe, nothing expanded."""
    from transformers import DynamicCache

    folder = tiny_model_dir(model_type)
    args = read_args(folder)
    ids = list(range(5, 25))
    _, cache = engine_prefill(folder, ids)
    assert isinstance(cache, LatentKVCache)
    hf_cache = DynamicCache()
    with torch.inference_mode():
        hf_reference(folder)(torch.tensor([ids]), past_key_values=hf_cache, use_cache=True)
    for layer in range(args.num_hidden_layers):
        c_kv, k_pe = hf_cache.layers[layer].keys[0, 0], hf_cache.layers[layer].values[0, 0]  # [S, R], [S, P]
        assert cache.latent[layer].shape[1:] == (1, args.mla.kv_lora_rank + args.head_dim)
        torch.testing.assert_close(cache.latent[layer][: len(ids), 0], torch.cat((c_kv, k_pe), -1), rtol=0, atol=1e-5)


@pytest.mark.parametrize("model_type", MLA_TYPES)
def test_planner_and_pool_count_the_compressed_bytes(tiny_model_dir, model_type):
    folder = tiny_model_dir(model_type)
    args = read_args(folder)
    row = args.mla.kv_lora_rank + args.head_dim  # head_dim: qk_rope_head_dim under MLA
    assert args.kv_bytes_per_token(4) == args.num_hidden_layers * row * 4 == model_sizes(args, 4).kv_bytes_per_token
    expanded = 2 * args.num_hidden_layers * args.num_attention_heads * (args.mla.qk_nope_head_dim + args.head_dim) * 4
    assert args.kv_bytes_per_token(4) < expanded / 4  # what per-head keys and values would take
    with Engine(EngineOptions(model=str(folder), device="cpu", experts="paged", expert_slots=2)) as engine:
        plan, cache = engine._core.plan, engine._core.runner.cache
        block_size = engine._core.runner.block_manager.block_size
        assert plan.kv_block_bytes == block_size * args.kv_bytes_per_token(4)
        pool_bytes = sum(t.numel() * t.element_size() for pool in cache.pools() for t in pool)
        assert pool_bytes == plan.kv_bytes == plan.kv_blocks * block_size * args.kv_bytes_per_token(4)


def hub_yarn_config(folder, factor: float) -> None:
    """config.json as DeepSeek's published checkpoints spell RoPE: top-level rope_theta, a legacy rope_scaling."""
    path = folder / "config.json"
    config = json.loads(path.read_text())
    config.pop("rope_parameters", None)
    config.update(rope_theta=10000.0, rope_scaling=dict(type="yarn", factor=factor, original_max_position_embeddings=64,
                                                        beta_fast=32, beta_slow=1, mscale=0.9, mscale_all_dim=0.8))
    path.write_text(json.dumps(config, indent=2))


@pytest.mark.parametrize("model_type", MLA_TYPES)
def test_yarn_and_its_softmax_correction_match_transformers(tmp_path, model_type):
    folder = write_tiny_model(tmp_path, model_type)
    hub_yarn_config(folder, factor=8.0)
    args = read_args(folder)
    assert args.rope_scaling is not None
    # mscale_all_dim counts
    assert args.attention.attention_scale != (args.mla.qk_nope_head_dim + args.head_dim) ** -0.5
    ids = list(range(3, 60, 2))
    ours, _ = engine_prefill(folder, ids)
    with torch.inference_mode():
        ref = hf_reference(folder)(torch.tensor([ids])).logits[0].float()
    assert (ours - ref).abs().max().item() < 1e-4


# DeepSeek-V2-Lite's and Moonlight-16B-A3B's published config.json, the fields that shape them.
V2_LITE = dict(model_type="deepseek_v2", vocab_size=102400, hidden_size=2048, intermediate_size=10944,
               moe_intermediate_size=1408, num_hidden_layers=27, num_attention_heads=16, num_key_value_heads=16,
               n_shared_experts=2, n_routed_experts=64, num_experts_per_tok=6, first_k_dense_replace=1,
               moe_layer_freq=1, kv_lora_rank=512, q_lora_rank=None, qk_nope_head_dim=128, qk_rope_head_dim=64,
               v_head_dim=128, topk_method="greedy", n_group=1, topk_group=1, routed_scaling_factor=1.0,
               norm_topk_prob=False, scoring_func="softmax", rms_norm_eps=1e-6, max_position_embeddings=163840,
               rope_theta=10000, rope_scaling=dict(type="yarn", factor=40, original_max_position_embeddings=4096,
                                                   beta_fast=32, beta_slow=1, mscale=0.707, mscale_all_dim=0.707),
               tie_word_embeddings=False, torch_dtype="bfloat16", attention_bias=False)
MOONLIGHT = dict(model_type="deepseek_v3", vocab_size=163840, hidden_size=2048, intermediate_size=11264,
                 moe_intermediate_size=1408, num_hidden_layers=27, num_attention_heads=16, num_key_value_heads=16,
                 n_shared_experts=2, n_routed_experts=64, num_experts_per_tok=6, first_k_dense_replace=1,
                 kv_lora_rank=512, q_lora_rank=None, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
                 topk_method="noaux_tc", scoring_func="sigmoid", n_group=1, topk_group=1, routed_scaling_factor=2.446,
                 norm_topk_prob=True, rms_norm_eps=1e-5, max_position_embeddings=8192, rope_theta=50000.0,
                 rope_scaling=None, tie_word_embeddings=False, torch_dtype="bfloat16", attention_bias=False)


@pytest.mark.parametrize("config, billions", [(V2_LITE, 15.7), (MOONLIGHT, 16.0)])
def test_published_configs_plan_compressed_kv_and_their_parameter_counts(config, billions):
    args = parse_config(config)
    assert args.kv_bytes_per_token(2) == 27 * (512 + 64) * 2  # 31 KB a token, against 27 x 2 x 16 x 192 x 2 expanded
    total = dense_params(args) + args.num_moe_layers * args.num_experts * args.expert_numel
    assert abs(total / 1e9 - billions) / billions < 0.02


def test_resizing_the_latent_pool_keeps_moved_blocks():
    cache = LatentKVCache(num_layers=2, num_slots=4 * 8, latent_dim=40, dtype=torch.float32, device="cpu")
    rows = torch.randn(8, 1, 40)
    for layer in range(2):
        cache.store(layer, torch.arange(16, 24), rows + layer)  # block 2 of 4
    cache.resize(6 * 8, {2: 5}, block_size=8)
    for layer in range(2):
        assert cache.latent[layer].shape == (48, 1, 40)
        assert torch.equal(cache.latent[layer][40:48], rows + layer)


@pytest.mark.parametrize("change, message", [
    (dict(kv_lora_rank=None), "'kv_lora_rank' is missing"),
    (dict(qk_rope_head_dim=63), "even qk_rope_head_dim"),
    (dict(v_head_dim="128"), "'v_head_dim' must be an integer"),
])
def test_bad_mla_fields_are_named(change, message):
    from engine.errors import ModelFormatError

    with pytest.raises(ModelFormatError, match=message):
        parse_config({**V2_LITE, **change})
