"""Load a GGUF MoE file for Wisp's own engine: the tokenizer and ModelArgs from its metadata, dense weights
expanded to the compute dtype, and the routed experts kept in their block formats in (pinned) host memory or on
the device, planned at their stored bytes; past the host budget, the rest stay memory-mapped in the file."""

from __future__ import annotations

from pathlib import Path

import torch

from engine.alloc.memory_plan import plan_memory
from engine.config import EngineOptions, Progress
from engine.gguf.expert_biases import expert_biases
from engine.gguf.model_file import GgufModel
from engine.gguf.sizes import gguf_model_sizes
from engine.gguf.weights import load_gguf_weights
from engine.hardware import pick_device
from engine.model.loader import LoadedWeights, expert_activation, resolve_dtype
from engine.model.model_tree import meta_model
from engine.quant.dense import dequantize_dense
from engine.quant.gguf_store import num_experts_of, quant_layout_of, quant_store_from_gguf
from engine.runtime.host_tier_rule import host_tier_planner
from engine.tokenizer import Tokenizer


def load_gguf(path: Path, options: EngineOptions, progress: Progress | None):
    """-> (LoadedWeights, Tokenizer, options, ModelSizes, PlanRequest, MemoryPlan, device) for finish_engine."""
    device = pick_device(options.device)
    model_file = GgufModel(path)  # engine.launch chose this engine: the file passed GgufModel.check there
    args = model_file.args
    tokenizer: Tokenizer = model_file.tokenizer()
    dtype = resolve_dtype(options.dtype, args, device)  # a quantized file: bf16 on a GPU, fp32 on the CPU
    sizes = gguf_model_sizes(model_file, dtype.itemsize)  # experts at their slot bytes
    plan_request = options.plan_request(args.max_position_embeddings)
    plan = plan_memory(sizes, plan_request)  # BudgetError below the minimum, before anything large is read
    weights = load_gguf_weights(path, dtype, device, dequantize=dequantize_dense)
    model = meta_model(args)
    model.load_state_dict(weights.state_dict, strict=True, assign=True)
    model.attach_rotary(device)
    model.eval()
    on_host = options.experts.keeps_experts_on_host
    biases = expert_biases(model_file, dtype, device) if args.expert_bias else None
    plan_tier = host_tier_planner(options, device.type)
    layout = quant_layout_of(weights.experts, expert_activation(args), biases)
    tier = plan_tier(list(weights.experts), num_experts_of(weights.experts), layout.expert_bytes)
    store = quant_store_from_gguf(weights.experts, torch.device("cpu") if on_host else device,
                                  pin=on_host and device.type == "cuda", progress=progress,
                                  activation=expert_activation(args), biases=biases, tier=tier)
    loaded = LoadedWeights(args=args, model=model, store=store, dtype=dtype)
    return loaded, tokenizer, options, sizes, plan_request, plan, device

