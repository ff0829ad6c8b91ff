"""lfm2_moe beyond the shared runner: the planner's bytes against what loads and what the state cache holds, the
short-conv state's bits across prefill and decode, and the config reader's layer kinds."""

from __future__ import annotations

import pytest
import torch

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.model.families import lfm2_moe
from engine.model.latent_cache import new_kv_cache
from engine.model.loader import load_weights
from engine.model.published_configs import LFM2_8B_A1B
from engine.model.short_conv import ShortConv
from engine.model.short_conv_args import ShortConvArgs
from engine.model.sizes import model_sizes

CONFIG = {"model_type": "lfm2_moe", "vocab_size": 64, "hidden_size": 32, "num_hidden_layers": 4,
          "num_attention_heads": 4, "num_key_value_heads": 2, "num_experts": 4, "num_experts_per_tok": 2,
          "moe_intermediate_size": 16, "intermediate_size": 48, "conv_L_cache": 3, "num_dense_layers": 1}


def test_planner_counts_what_loads_and_what_the_state_cache_holds(tiny_model_dir):
    folder = tiny_model_dir("lfm2_moe")
    weights = load_weights(folder, torch.device("cpu"), "bfloat16")
    sizes = model_sizes(weights.args, 2)
    loaded = sum(p.numel() * p.element_size() for p in weights.model.parameters())
    tied = weights.model.lm_head.weight is weights.model.embed_tokens.weight
    assert sizes.dense_bytes == loaded and tied == weights.args.tie_word_embeddings
    cache = new_kv_cache(weights.args, 16, torch.bfloat16, "cpu", num_seqs=2)
    assert cache.state_bytes == 2 * sizes.state_bytes_per_seq == 2 * 3 * (2 * 64 * 2)  # 3 conv layers, [K-1, D]


def test_short_conv_decode_steps_have_the_bits_of_one_prefill():
    torch.manual_seed(0)
    args = type("Args", (), dict(hidden_size=32, short_conv=ShortConvArgs(conv_kernel_dim=3, bias=True)))
    conv = ShortConv(args, 0)
    with torch.no_grad():
        for param in conv.parameters():
            param.normal_()
        inputs, gate = conv.mix_inputs(torch.randn(9, 32))
        whole, _ = conv.prefill(inputs, (torch.zeros(2, 32),))
        head, (history,) = conv.prefill(tuple(t[:4] for t in inputs), (torch.zeros(2, 32),))
        rows, states = [head], (history[None],)
        for t in range(4, 9):
            out, states = conv.step(tuple(i[t : t + 1] for i in inputs), states)
            rows.append(out)
    assert torch.equal(torch.cat(rows), whole)


def test_layer_types_from_full_attn_idxs_and_errors():
    config = dict(CONFIG, full_attn_idxs=[1, 3])
    assert lfm2_moe.read_config(config).layer_types == ("conv", "full_attention", "conv", "full_attention")
    assert lfm2_moe.read_config(config).moe_layers == (False, True, True, True)
    with pytest.raises(ModelFormatError, match="layer_types"):
        lfm2_moe.read_config(dict(CONFIG, layer_types=["conv", "mamba", "conv", "conv"]))


def test_published_shape_reads():
    args = lfm2_moe.read_config(LFM2_8B_A1B)
    assert (args.num_kv_layers, args.num_linear_layers, args.num_moe_layers) == (6, 18, 22)
    assert args.tie_word_embeddings and args.router.kind == "sigmoid_topk"
    assert args.kv_bytes_per_token(2) == 6 * 2 * 8 * 64 * 2
    assert args.state_bytes_per_seq(2) == 18 * 2 * 2048 * 2  # [K-1, D] bf16 per conv layer
    with pytest.raises(UnsupportedModelError, match="use_expert_bias"):
        lfm2_moe.read_config(dict(LFM2_8B_A1B, use_expert_bias=False))
