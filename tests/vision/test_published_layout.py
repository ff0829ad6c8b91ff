"""Qwen3-VL-MoE's published checkpoints store the stacked experts transposed (gate_up_proj [E, D, 2I], down_proj
[E, I, D]) against what transformers writes; Wisp reads both, with the same tokens."""

import shutil

import torch
from safetensors.torch import load_file, save_file

from tests.vision.test_vl_tokens import CONVERSATIONS, wisp_tokens


def test_published_expert_layout_gives_the_same_tokens(tiny_vl_moe_dir, tmp_path):
    published = tmp_path / "published"
    shutil.copytree(tiny_vl_moe_dir, published)
    tensors = load_file(published / "model.safetensors")
    stacked = [name for name in tensors if name.endswith(("experts.gate_up_proj", "experts.down_proj"))]
    assert stacked
    for name in stacked:
        tensors[name] = tensors[name].transpose(1, 2).contiguous()
    save_file(tensors, published / "model.safetensors", metadata={"format": "pt"})
    messages = CONVERSATIONS["one image"]
    expected = wisp_tokens(tiny_vl_moe_dir, messages)
    assert wisp_tokens(published, messages) == expected
    assert wisp_tokens(published, messages, experts="paged", expert_slots=2) == expected
    assert torch.equal(load_file(tiny_vl_moe_dir / "model.safetensors")[stacked[0]],
                       tensors[stacked[0]].transpose(1, 2))
