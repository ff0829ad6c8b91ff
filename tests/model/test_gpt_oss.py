"""gpt_oss as users run it: `wisp run --json` on a tiny checkpoint with gpt-oss-20b's config keys gives
transformers' greedy tokens, the same bits in every expert mode, and a config read as transformers reads it."""

from __future__ import annotations

import json

import pytest
import torch

from engine.errors import ModelFormatError
from engine.model.families import parse_config
from engine.model.sizes import dense_params
from tests.model.test_models import hf_reference

# a prompt longer than the tiny model's sliding window, so prefill and decode both cross it
PROMPT = "class Stack:\n    def push(self, item):\n        self.items.append(item)\n"
MAX_TOKENS = 24


def wisp_json(folder, capsys, *options: str) -> dict:
    from engine.cli import main

    capsys.readouterr()
    assert main(["run", str(folder), "--prompt", PROMPT, "--max-tokens", str(MAX_TOKENS), "--device", "cpu",
                 "--json", *options]) == 0
    return json.loads(capsys.readouterr().out)


def test_cli_json_greedy_tokens_match_transformers(tiny_model_dir, capsys):
    from engine.text.tokenizer import Tokenizer

    folder = tiny_model_dir("gpt_oss")
    result = wisp_json(folder, capsys)
    ids = Tokenizer.from_folder(folder).encode(PROMPT)
    assert len(ids) > read_config(folder)["sliding_window"]
    with torch.inference_mode():
        out = hf_reference(folder).generate(torch.tensor([ids]), max_new_tokens=MAX_TOKENS, do_sample=False,
                                            eos_token_id=None, pad_token_id=0)
    assert result["token_ids"] == out[0, len(ids):].tolist()
    assert result["stats"]["prompt_tokens"] == len(ids)


def test_cli_json_is_bitwise_equal_across_expert_modes(tiny_model_dir, capsys):
    folder = tiny_model_dir("gpt_oss")
    reference = wisp_json(folder, capsys, "--experts", "resident")
    for options in (["--experts", "static"], ["--experts", "paged", "--expert-slots", "2"],
                    ["--experts", "paged", "--expert-slots", "3"], ["--experts", "paged", "--expert-slots", "8"]):
        result = wisp_json(folder, capsys, *options)
        assert (result["token_ids"], result["logprobs"]) == (reference["token_ids"], reference["logprobs"]), options


def read_config(folder) -> dict:
    return json.loads((folder / "config.json").read_text())


def test_config_reads_the_published_keys(tiny_model_dir):
    config = read_config(tiny_model_dir("gpt_oss"))
    args = parse_config(config)
    assert (args.num_experts, args.num_experts_per_tok, args.attention.sliding_window) == (8, 2, 8)
    assert [args.window(layer) for layer in range(2)] == [8, None]
    assert args.rope_scaling.factor == 32 and args.rope_scaling.truncate is False and args.rope_theta == 150000
    del config["num_experts_per_tok"], config["layer_types"], config["rope_scaling"]
    bare = parse_config(config)  # experts_per_token alone; transformers' defaults for the rest
    assert bare.num_experts_per_tok == 2 and bare.layer_types == ("sliding_attention", "full_attention")
    assert bare.rope_scaling == args.rope_scaling
    with pytest.raises(ModelFormatError, match="layer_types"):
        parse_config({**config, "layer_types": ["sliding_attention"]})


def test_dense_size_counts_biases_and_sinks_as_transformers_has_them(tiny_model_dir):
    folder = tiny_model_dir("gpt_oss")
    args = parse_config(read_config(folder))
    model = hf_reference(folder)
    routed = sum(p.numel() for name, p in model.named_parameters()
                 if name.endswith(("experts.gate_up_proj", "experts.down_proj")))
    total = sum(p.numel() for p in model.parameters())
    assert dense_params(args) == total - routed
    assert routed == args.num_moe_layers * args.num_experts * args.expert_numel


@pytest.mark.parametrize("path", ["gathered", "per-expert"])
def test_expert_layout_computes_transformers_experts(path, monkeypatch):
    """One MoE layer-step through the layout (both step paths) against transformers' GptOssExperts."""
    from transformers import GptOssConfig
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssExperts, GptOssTopKRouter

    from engine.experts.routing import dispatch
    from engine.experts.formats.activation import ClampedSwiGlu, ExpertBias
    from engine.quant.dense_layout import DenseLayout
    from engine.model.interleaved_experts import halves, pack_layer
    from engine.model.routers import TopKSoftmax

    E, D, I, T, K = 8, 32, 16, 6, 3
    config = GptOssConfig(hidden_size=D, intermediate_size=I, num_local_experts=E, num_experts_per_tok=K,
                          swiglu_limit=1.5, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1)
    torch.manual_seed(0)
    experts, router = GptOssExperts(config).eval(), GptOssTopKRouter(config)
    for param in [*experts.parameters(), *router.parameters()]:
        torch.nn.init.normal_(param, 0.0, 0.3)
    x = torch.randn(T, D)
    with torch.no_grad():
        _, scores, indices = router(x)
        reference = experts(x, indices, scores)
        logits = torch.nn.functional.linear(x, router.weight, router.bias)
    ids, weights = TopKSoftmax(K).select(logits)
    assert torch.equal(ids, indices) and torch.equal(weights, scores)
    bias = ExpertBias(gate_up=halves(experts.gate_up_proj_bias.detach()), down=experts.down_proj_bias.detach())
    layout = DenseLayout(D, I, torch.float32, ClampedSwiGlu(1.702, 1.5), {0: bias}).for_layer(0)
    blocks = torch.empty(E, layout.numel)
    pack_layer(layout, blocks, experts.gate_up_proj.detach(), experts.down_proj.detach())
    if path == "per-expert":
        monkeypatch.setattr(dispatch, "GATHER_MAX_ENTRIES", 0)
    with torch.no_grad():
        ours = layout.run_blocks(x, ids, weights, blocks)
    torch.testing.assert_close(ours, reference, atol=1e-5, rtol=1e-5)
    with pytest.raises(TypeError, match="for_layer"):
        DenseLayout(D, I, torch.float32, ClampedSwiGlu(1.702, 1.5), {0: bias}).run_blocks(x, ids, weights, blocks)


def test_an_mxfp4_folder_is_refused_in_one_line(tiny_model_dir, tmp_path, capsys):
    """The published folders' experts are MXFP4 blocks and scales: refused by name before any expert memory."""
    import shutil

    from safetensors.torch import load_file, save_file

    from tests.engine.test_errors import assert_user_error, wisp_run

    folder = tmp_path / "mxfp4"
    shutil.copytree(tiny_model_dir("gpt_oss"), folder)
    tensors = load_file(folder / "model.safetensors")
    for name in [n for n in tensors if n.endswith(("experts.gate_up_proj", "experts.down_proj"))]:
        tensors[name + "_blocks"] = tensors.pop(name).to(torch.uint8)
    save_file(tensors, folder / "model.safetensors")
    assert_user_error(*wisp_run(capsys, folder), "MXFP4", "bf16")
