"""The transformers + accelerate arm of the benchmarks (bench.hf_offload), on the CPU at a tiny shape."""

from __future__ import annotations

import json

import torch

from engine.alloc.memory_plan import MiB
from bench import hf_offload
from engine.model.shapes import shape


def test_accelerate_keeps_the_layers_beyond_the_budget_on_the_host():
    model = hf_offload.random_model(shape("qwen3-topology-tiny", 6), torch.device("cpu"))
    assert all(p.dtype == torch.bfloat16 and p.abs().max() > 0 for p in model.parameters())
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    device_map = hf_offload.placement(model, hf_offload.ACTIVATION_RESERVE + size // 2)
    on_gpu = [name for name, where in device_map.items() if where == 0]
    on_host = [name for name, where in device_map.items() if where == "cpu"]
    assert "model.layers.0" in on_gpu and "model.layers.5" in on_host  # leading layers fit, the rest is offloaded
    gpu_bytes = sum(p.numel() * p.element_size() for n, p in model.named_parameters()
                    if any(n.startswith(m + ".") for m in on_gpu))
    assert gpu_bytes <= size // 2 + MiB


def test_the_arm_generates_and_writes_its_row(tmp_path):
    hf_offload.main(["--shape", "qwen3-topology-tiny", "--layers", "2", "--budgets", "1", "--prompt", "16",
                     "--tokens", "4", "--device", "cpu", "--out", str(tmp_path)])
    result = json.loads((tmp_path / "hf-offload-qwen3-topology-tiny-l2.json").read_text())
    (row,) = result["rows"]
    assert row["arm"] == "hf-accelerate" and row["decode_tok_s"] > 0 and row["num_tokens"] == 4
