"""nemotron_h beyond the shared runner: the Mamba-2 mixer against transformers' (prefill across chunks, then decode
steps), the planner's bytes against what loads and what the state cache holds, the config reader's errors."""

from __future__ import annotations

import json

import pytest
import torch

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.model.families import nemotron_h
from engine.model.latent_cache import new_kv_cache
from engine.model.loader import load_weights
from engine.model.mamba2_args import Mamba2Args
from engine.model.mamba2_mixer import Mamba2Mixer
from engine.model.published_configs import NEMOTRON_3_NANO_30B_A3B
from engine.model.sizes import model_sizes


def reference_mixer(chunk_size: int):
    from transformers import NemotronHConfig
    from transformers.models.nemotron_h.modeling_nemotron_h import NemotronHMamba2Mixer

    config = NemotronHConfig(vocab_size=64, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                             hybrid_override_pattern="M", mamba_num_heads=8, mamba_head_dim=8, ssm_state_size=16,
                             n_groups=2, conv_kernel=4, chunk_size=chunk_size)
    mixer = NemotronHMamba2Mixer(config, 0)
    with torch.no_grad():
        for param in mixer.parameters():
            param.normal_(0.0, 0.3)
    return config, mixer


def test_mamba2_mixer_prefill_then_steps_match_transformers():
    """13 prompt tokens in two prefills (5, then 8 from the first's states: a chunk and a part of one), then 8
    recurrent steps from the kept states, against transformers' mixer over all 21 tokens at once."""
    torch.manual_seed(0)
    config, reference = reference_mixer(chunk_size=8)
    args = type("Args", (), dict(hidden_size=64, rms_norm_eps=config.layer_norm_epsilon,
                                 mamba=Mamba2Args(num_heads=8, head_dim=8, state_size=16, n_groups=2,
                                                  conv_kernel_dim=4, chunk_size=8)))
    ours = Mamba2Mixer(args, 0)
    ours.load_state_dict(reference.state_dict())
    x = torch.randn(1, 21, 64)
    with torch.no_grad():
        want = reference(x)[0]
        inputs, z = ours.mix_inputs(x[0])
        zeros = tuple(torch.zeros(shape) for shape, _ in args.mamba.state_shapes(64))
        y, states = ours.prefill(tuple(t[:5] for t in inputs), zeros)
        outs = [ours.output(y, z[:5])]
        y, states = ours.prefill(tuple(t[5:13] for t in inputs), states)
        outs.append(ours.output(y, z[5:13]))
        states = tuple(s[None] for s in states)
        for t in range(13, 21):
            y, states = ours.step(tuple(i[t : t + 1] for i in inputs), states)
            outs.append(ours.output(y, z[t : t + 1]))
    assert (torch.cat(outs) - want).abs().max().item() < 1e-5


def test_planner_counts_what_loads_and_what_the_state_cache_holds(tiny_model_dir):
    folder = tiny_model_dir("nemotron_h")
    weights = load_weights(folder, torch.device("cpu"), "bfloat16")
    sizes = model_sizes(weights.args, 2)
    loaded = sum(p.numel() * p.element_size() for p in weights.model.parameters())
    assert sizes.dense_bytes == loaded
    assert sizes.expert_bytes == weights.store.layout.expert_bytes
    cache = new_kv_cache(weights.args, 16, torch.bfloat16, "cpu", num_seqs=3)
    assert cache.state_bytes == 3 * sizes.state_bytes_per_seq > 0
    assert len(cache.k) == weights.args.num_kv_layers == 1  # one attention layer of six


def test_published_shape_reads():
    args = nemotron_h.read_config(NEMOTRON_3_NANO_30B_A3B)
    assert (args.num_hidden_layers, args.num_moe_layers, args.num_linear_layers, args.num_kv_layers) == (52, 23, 23, 6)
    assert args.experts.activation == "relu_squared" and args.rotary_dim == 0
    # per sequence: 23 Mamba layers' conv history [3, 4096 + 2 * 8 * 128] bf16 and SSM state [64, 64, 128] fp32
    assert args.state_bytes_per_seq(2) == 23 * (3 * (4096 + 2048) * 2 + 64 * 64 * 128 * 4)


@pytest.mark.parametrize("change, error", [
    ({"hybrid_override_pattern": "MX*"}, ModelFormatError),
    ({"mlp_hidden_act": "silu"}, UnsupportedModelError),
    ({"mamba_num_heads": None}, ModelFormatError),
])
def test_config_errors_name_the_field(change, error):
    config = json.loads(json.dumps(NEMOTRON_3_NANO_30B_A3B))
    config.update(change)
    with pytest.raises(error):
        nemotron_h.read_config(config)
