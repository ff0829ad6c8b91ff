"""GPU placement for llama.cpp: which layers and experts sit on the device, as a MemoryPlan, and the expert
overrides (--n-cpu-moe) reaching llama.cpp through its low-level API."""

import pytest

from engine.gguf.info import read_info
from engine.backends.gguf_placement import Placement, memory_plan, model_params, resolve_placement
from engine.backends.llama_cpp_model import LOG, ContextSettings, LlamaCppModel
from engine.config import EngineOptions
from engine.errors import RequestError


def test_n_cpu_moe_overrides_reach_llama_cpp(demo_gguf):
    params, keep_alive = model_params(Placement("cuda", n_gpu_layers=9, n_cpu_moe=3, num_layers=8))
    model = LlamaCppModel(demo_gguf, params, ContextSettings(n_ctx=256))
    model.close()
    overridden = sorted(line.split()[1] for line in LOG.matching("buffer type overridden to CPU"))
    assert overridden == sorted(f"blk.{layer}.ffn_{p}_exps.weight" for layer in range(3) for p in ("gate", "up", "down"))


def test_the_plan_counts_what_llama_cpp_offloads(demo_gguf):
    info = read_info(demo_gguf)
    everything = memory_plan(info, Placement("cpu", 0, 0, 8), n_ctx=4096)
    split = memory_plan(info, Placement("cuda", n_gpu_layers=5, n_cpu_moe=5, num_layers=8), n_ctx=4096)
    all_tensors = sum(info.layer_bytes.values()) + sum(info.expert_layer_bytes.values()) + sum(info.other_bytes.values())
    assert everything.dense_bytes + everything.expert_device_bytes == all_tensors
    assert everything.layer_slots == (16,) * 8 and everything.offloaded_layers == 0
    # n_gpu_layers 5 = the output layer and layers 4..7; experts of layers 0..4 stay on the CPU
    assert split.layer_slots == (0, 0, 0, 0, 0, 16, 16, 16) and split.offloaded_layers == 5
    assert split.expert_device_bytes == 3 * 16 * info.expert_bytes
    assert split.kv_bytes == everything.kv_bytes // 2 and split.dense_bytes < everything.dense_bytes


def test_the_device_follows_the_build_and_the_options(demo_gguf):
    info = read_info(demo_gguf)
    assert resolve_placement(EngineOptions(), info, has_gpu=False) == Placement("cpu", 0, 0, 8)
    assert resolve_placement(EngineOptions(), info, has_gpu=True) == Placement("cuda", 9, 0, 8)
    chosen = resolve_placement(EngineOptions(n_gpu_layers=4, n_cpu_moe=20), info, has_gpu=True)
    assert chosen == Placement("cuda", 4, 8, 8)
    with pytest.raises(RequestError, match="no GPU support"):
        resolve_placement(EngineOptions(device="cuda"), info, has_gpu=False)
