"""Load a planned GGUF MoE file for Wisp's own engine: the tokenizer from its metadata, dense weights in the file's
quantized blocks or expanded to the compute dtype (as the plan counted them: LoadPlan.keeps_file_types), and the
routed experts kept in their block formats in (pinned) host memory or on the device,
planned at their stored bytes (engine.loading.plan); past the host budget, the rest stay memory-mapped in the file."""

from __future__ import annotations

import torch

from engine.config import EngineOptions, Progress
from engine.gguf.expert_biases import expert_biases
from engine.gguf.weights import dense_model, load_gguf_weights
from engine.loading.plan import LoadPlan
from engine.model.loader import LoadedWeights, expert_activation
from engine.quant.dense import dequantize_dense
from engine.quant.gguf_store import num_experts_of, quant_layout_of, quant_store_from_gguf
from engine.runtime.host_tier_rule import host_tier_planner
from engine.text.tokenizer import Tokenizer


def load_gguf(plan: LoadPlan, options: EngineOptions, progress: Progress | None) -> tuple[LoadedWeights, Tokenizer]:
    """-> (LoadedWeights, Tokenizer) of the planned GGUF file (plan.gguf: engine.launch chose Wisp's engine for it)."""
    model_file, args, dtype, device = plan.gguf, plan.args, plan.dtype, plan.device
    tokenizer: Tokenizer = model_file.tokenizer()
    weights = load_gguf_weights(model_file.path, dtype, device, dequantize=dequantize_dense,
                                keep_types=plan.keeps_file_types)
    model = dense_model(weights, dtype, device, merge_qkv=options.merge_qkv)
    on_host = options.experts.keeps_experts_on_host
    biases = expert_biases(model_file, dtype, device) if args.experts.bias else None
    plan_tier = host_tier_planner(options, device.type)
    layout = quant_layout_of(weights.experts, expert_activation(args), biases)
    tier = plan_tier(list(weights.experts), num_experts_of(weights.experts), layout.expert_bytes)
    store = quant_store_from_gguf(weights.experts, torch.device("cpu") if on_host else device,
                                  pin=on_host and device.type == "cuda", progress=progress,
                                  activation=expert_activation(args), biases=biases, tier=tier)
    return LoadedWeights(args=args, model=model, store=store, dtype=dtype), tokenizer
