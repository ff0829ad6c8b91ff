"""gpt_oss as users run it: `wisp run --json` on a tiny checkpoint with gpt-oss-20b's config keys gives
transformers' greedy tokens, the same bits in every expert mode, and a config read as transformers reads it."""

from __future__ import annotations

import json

import pytest
import torch

from engine.errors import ModelFormatError
from engine.model.registry import parse_config
from engine.model.sizes import dense_params
from tests.engine.test_models import hf_reference

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
    from engine.tokenizer import Tokenizer

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
    assert (args.num_experts, args.num_experts_per_tok, args.sliding_window) == (8, 2, 8)
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
