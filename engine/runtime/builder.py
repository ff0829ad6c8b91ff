"""Assemble a ready LLMEngine for a model source (engine.loading): plan device memory, load tokenizer and weights,
pick the expert provider, size the KV cache."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from engine.alloc.memory_plan import MemoryPlan, PlanRequest, small_step_drafts
from engine.config import EngineOptions
from engine.config import Progress
from engine.errors import RequestError, UnsupportedModelError
from engine.experts.providers.factory import make_provider
from engine.experts.pager.pager_kernels import runs_on
from engine.kv.block_manager import BlockManager
from engine.kv.state_slots import HybridBlockManager
from engine.model.attention import KVCache
from engine.model.latent_cache import new_kv_cache
from engine.generation.model_info import ModelInfo
from engine.generation.reasoning_options import has_thinking_switch, takes_reasoning_effort
from engine.generation.fim import fim_token_ids
from engine.generation.tool_calls import can_call_tools
from engine.loading.plan import LoadPlan, plan_for
from engine.loading.source import ModelSource, SourceKind
from engine.model.loader import LoadedWeights, load_weights
from engine.loading.model_path import DEMO_MODEL
from engine.runtime.llm_engine import LLMEngine
from engine.runtime.decode_graphs import DecodeGraphs
from engine.runtime.host_tier_rule import host_tier_planner
from engine.loading.draft_source import draft_tensors, find_draft_layer
from engine.runtime.draft_layers import drafting_kind
from engine.runtime.speculation import Speculation
from engine.runtime.verify_step import can_draft
from engine.generation.speculative.draft_graphs import DraftSteps
from engine.generation.speculative.mtp import MtpDrafter
from engine.runtime.determinism import use_deterministic_kernels
from engine.runtime.model_runner import ModelRunner
from engine.runtime.replan import Replanner
from engine.runtime.scheduler import Scheduler
from engine.text.tokenizer import Tokenizer
from engine.system.triton_support import HAS_TRITON
from engine.vision.load_tower import load_vision
from engine.gguf.mmproj_tower import load_mmproj_vision
from engine.expert_modes import ExpertMode


def display_name(folder: Path) -> str:
    if folder == DEMO_MODEL:
        return "Wisp demo (qwen3_moe)"
    for parent in folder.parents:
        if parent.name.startswith("models--"):
            return parent.name[len("models--"):].replace("--", "/")
    return folder.name


def build(source: ModelSource, options: EngineOptions, progress: Progress | None = None) -> tuple[LLMEngine, ModelInfo]:
    """Wisp's own engine on a local source (engine.launch picks the backend): planned first, so a budget too small
    is refused before anything large is read, then loaded and assembled from that plan."""
    plan = plan_for(source, options)
    memory = plan.memory  # BudgetError naming the minimum
    draft_layer, why_not, _ = find_draft_layer(source, plan.gguf, plan.args)
    drafting = drafting_kind(options.speculative, draft_layer, display_name(source.path), why_not)
    if source.kind is SourceKind.GGUF:
        from engine.runtime.gguf_build import load_gguf

        weights, tokenizer = load_gguf(plan, options, progress)
    elif source.is_local_folder:
        weights, tokenizer = load_checkpoint(plan, options, progress)
    else:
        raise UnsupportedModelError(f"{source.location}: Wisp's engine loads model folders and GGUF files")
    engine, info = finish_engine(weights, tokenizer, options, plan, memory)
    if source.is_local_folder and source.kind is not SourceKind.GGUF:
        engine.runner.vision = load_vision(source.path, plan.device, weights.dtype, weights.args.vocab_size)
    elif plan.mmproj is not None:
        engine.runner.vision = load_mmproj_vision(plan.mmproj, source.path, weights.args.hidden_size,
                                                  tokenizer.token_to_id, plan.device, weights.dtype)
    if drafting is not None:
        drafter = attach_drafter(engine, weights, plan, draft_layer) if drafting == "mtp" else None
        engine.speculation = Speculation(engine.max_draft_tokens, drafter=drafter)
        engine.drafts_by_default = True
    return engine, replace(info, has_draft_layers=draft_layer is not None)


def attach_drafter(engine: LLMEngine, weights: LoadedWeights, plan: LoadPlan, draft_layer,
                   draft_graphs: bool = False) -> MtpDrafter:
    """The checkpoint's draft layer on the device, its KV pool beside the model's, fed the runner's hidden states."""
    tensors = draft_tensors(plan.source, plan.gguf, weights.args, draft_layer)
    return attach_draft_tensors(engine, weights, tensors, draft_layer, plan.device, draft_graphs)


def attach_draft_tensors(engine: LLMEngine, weights: LoadedWeights, tensors, draft_layer, device: torch.device,
                         draft_graphs: bool = False) -> MtpDrafter:
    """A draft layer read from tensors (engine.model.mtp_loader.DraftTensors: a checkpoint's, or a benchmark's
    random ones) on the device, its KV pool beside the model's, fed the runner's hidden states. draft_graphs: the
    drafts after a proposal's first run as static-shape steps (engine.generation.speculative.draft_graphs), CUDA
    graphs on CUDA, eagerly elsewhere; off until the GPU tests (tests/gpu/test_mtp_draft_graphs_gpu.py) have run."""
    from engine.model.loader import expert_activation
    from engine.model.mtp_loader import load_draft_model

    runner, args = engine.runner, weights.args
    kernel = next((layer.self_attn.decode_kernel for layer in weights.model.layers if hasattr(layer, "self_attn")),
                  "sdpa")  # the model's attention decode kernel (assemble_engine's choice)
    draft = load_draft_model(tensors, args, draft_layer, weights.model, runner.cache, expert_activation(args),
                             weights.dtype, device, kernel)
    steps = DraftSteps(draft, engine.max_model_len, device, weights.dtype, use_graphs=device.type == "cuda") \
        if draft_graphs else None
    drafter = MtpDrafter(draft, engine.scheduler.block_manager, lambda seq: can_draft(engine, seq), steps)
    runner.hidden_observer = drafter.observe
    return drafter


def load_checkpoint(plan: LoadPlan, options: EngineOptions, progress: Progress | None):
    """-> (LoadedWeights, Tokenizer) of a safetensors folder (experts in bf16/fp32 or their stored MXFP4 blocks)."""
    folder, device = plan.source.path, plan.device
    tokenizer = Tokenizer.from_folder(folder)
    on_host = options.experts.keeps_experts_on_host
    weights = load_weights(folder, device, str(plan.dtype).replace("torch.", ""),
                           expert_device=torch.device("cpu") if on_host else device,
                           pin_experts=on_host and device.type == "cuda", progress=progress,
                           plan_tier=host_tier_planner(options, device.type), dense_quant=options.dense_quant)
    return weights, tokenizer


def finish_engine(weights: LoadedWeights, tokenizer: Tokenizer, options: EngineOptions, plan: LoadPlan,
                  memory: MemoryPlan) -> tuple[LLMEngine, ModelInfo]:
    """Loaded weights (a safetensors folder's or a GGUF file's) -> the engine, its controller and its ModelInfo."""
    args, max_model_len, device, path = weights.args, plan.request.max_model_len, plan.device, plan.source.path
    engine = assemble_engine(weights, tokenizer, options, memory, device, max_model_len,
                             Replanner(plan.sizes, plan.request))
    if memory.mode is ExpertMode.PAGED and options.budget_bytes and options.online and options.expert_slots is None:
        attach_controller(engine, plan.sizes, plan.request, device, args.num_hidden_layers)
    info = ModelInfo(
        path=str(path), name=display_name(path), model_type=args.model_type, num_layers=args.num_hidden_layers,
        num_experts=args.num_experts, top_k=args.num_experts_per_tok, max_model_len=max_model_len,
        device=str(device), dtype=str(weights.dtype).replace("torch.", ""),
        has_chat_template=tokenizer.has_chat_template, plan=memory,
        warnings=tuple(w for w in [weights.store.warning, args.extra.get("warning"), dense_quant_note(plan)] if w),
        reasoning_effort=takes_reasoning_effort(tokenizer),
        thinking_switch=has_thinking_switch(tokenizer), tool_calls=can_call_tools(tokenizer),
        fill_in_middle=fim_token_ids(tokenizer) is not None,
    )
    return engine, info


def dense_quant_note(plan: LoadPlan) -> str | None:
    """The warning a load with --dense-quant carries: its outputs are not the checkpoint's."""
    if plan.dense_quant is None:
        return None
    return (f"dense weights quantized to {plan.dense_quant.upper()} at load (--dense-quant): outputs differ from "
            "the checkpoint's")


def assemble_engine(weights: LoadedWeights, tokenizer: Tokenizer, options: EngineOptions, plan: MemoryPlan,
                    device: torch.device, max_model_len: int, replanner: Replanner | None = None,
                    provider=None) -> LLMEngine:
    """Attach the planned expert provider (or the given one) and KV cache to loaded weights (also benchmarks)."""
    args = weights.args
    if device.type == "cuda":
        use_deterministic_kernels(options.deterministic)
    attention = decode_attention_kernel(options, device)
    for layer in weights.model.layers:
        if hasattr(layer, "self_attn"):  # a hybrid model's linear-attention layers have none
            layer.self_attn.decode_kernel = attention
    experts = provider or make_provider(plan, weights.store, device, args.num_experts_per_tok, options.prefetch)
    block_manager = new_block_manager(args, plan.kv_blocks, options)
    cache = new_kv_cache(args, plan.kv_blocks * options.block_size, weights.dtype, device, options.max_num_seqs,
                         plan.verify_state_rows)
    scheduler = Scheduler(block_manager, options.max_num_seqs, max_num_batched_tokens=max_model_len,
                          prefill_chunk=options.prefill_chunk)
    runner = ModelRunner(weights.model, experts, cache, block_manager, device,
                         decode_path(options, weights.model, cache, device, max_model_len))
    engine = LLMEngine(runner, scheduler, tokenizer, max_model_len, plan, replanner)
    engine.max_draft_tokens = small_step_drafts(options.draft_tokens, args.num_experts_per_tok, plan.expert_bytes)
    if is_on_host(weights.store):
        engine.host_tier = weights.store.tier
    return engine


def new_block_manager(args, num_blocks: int, options: EngineOptions) -> BlockManager:
    """A hybrid model's sequences also hold a linear-attention state slot each (engine.kv.state_slots)."""
    if args.is_hybrid:
        return HybridBlockManager(num_blocks, options.block_size, options.max_num_seqs)
    return BlockManager(num_blocks, options.block_size)


def is_on_host(store) -> bool:
    return all(block.device.type == "cpu" for block in store.blocks.values())


def decode_attention_kernel(options: EngineOptions, device: torch.device) -> str:
    """auto: the Triton kernel on CUDA, because SDPA's decode kernels do not repeat their last bits from run to run
    (engine.model.decode_attention). The CPU keeps SDPA (Triton needs a GPU), and so do GPUs older than Ampere
    (the kernel's bf16 tl.dot)."""
    if options.attention == "triton" and not runs_on(device):
        raise RequestError("--attention triton needs a CUDA GPU and Triton installed; use auto or sdpa")
    if options.attention != "auto":
        return options.attention
    ampere = device.type == "cuda" and torch.cuda.get_device_capability(device) >= (8, 0)
    return "triton" if ampere and HAS_TRITON else "sdpa"


def decode_path(options: EngineOptions, model, cache: KVCache, device: torch.device, max_model_len: int):
    """Static-shape decode (CUDA graphs) on CUDA, hybrid linear-attention models included (each sequence's
    state read and written at its slot); the dynamic per-sequence path on the CPU."""
    mode = options.decode if options.decode != "auto" else ("graphs" if device.type == "cuda" else "dynamic")
    if mode == "dynamic":
        return None
    if mode == "graphs" and device.type != "cuda":
        raise UnsupportedModelError("CUDA graphs need a CUDA device; use --decode static or dynamic on the CPU")
    # a step's rows: its sequences, or one sequence's last token and its drafts (a verify step)
    max_rows = max(options.max_num_seqs, 1 + options.draft_tokens)
    return DecodeGraphs(model, cache, max_model_len, use_graphs=mode == "graphs", max_rows=max_rows)


def attach_controller(engine: LLMEngine, sizes, request: PlanRequest, device: torch.device, num_layers: int) -> None:
    """The online MV-WSA controller: fed by the pager's routing, consulted at drained barriers."""
    from engine.alloc.memory_plan import kv_floor_bytes
    from engine.alloc.online_controller import OnlineController
    from engine.experts.pager.calibrate import estimated_compute, link_cost

    active = sizes.num_moe_layers * sizes.top_k * sizes.expert_bytes
    link = link_cost(device, *estimated_compute(sizes.dense_bytes, active, num_layers, device),
                     max_device_bytes=engine.plan.workspace_bytes)  # idle until the first step
    # Its floor is one full-length request: concurrent requests beyond it get KV at the admission barrier.
    controller = OnlineController(sizes.num_experts, sizes.top_k, kv_floor_bytes(sizes, 1, request.max_model_len), link)
    engine.controller = controller
    engine.runner.experts.add_routing_listener(controller.observe_routing)
