"""Build a runnable model from a Hugging Face folder: config -> ModelArgs, dense weights -> module, experts -> store."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from engine.alloc.host_tier import TierPlanner
from engine.alloc.memory_plan import ModelSizes
from engine.config import Progress
from engine.experts.formats.activation import GELU_TANH_GLU, RELU_SQUARED, SILU_GLU, ClampedSwiGlu
from engine.quant.dense_layout import DenseLayout
from engine.quant.dense import install_quantized, sizes_in_blocks
from engine.quant.dense_quant import quantize_weight, quantized_types
from engine.experts.formats.store import ExpertStore
from engine.model.args import ModelArgs
from engine.model.checkpoint import Checkpoint, is_stacked_transposed
from engine.model.checkpoint_rows import CheckpointRows
from engine.model.config_file import read_args
from engine.model.fp32_parameters import fp32_parameter_names
from engine.model.interleaved_experts import load_expert_biases, load_experts as load_interleaved_experts
from engine.model.families import family
from engine.model.sizes import model_sizes
from engine.model.model_tree import meta_model
from engine.model.transformer import MoeTransformer
from engine.model.weight_names import MoeWeightNames
from engine.quant.mxfp4_checkpoint import load_mxfp4_experts, mxfp4_layout

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


def resolve_dtype(requested: str, args: ModelArgs, device: torch.device) -> torch.dtype:
    """'auto' honours the checkpoint's torch_dtype on a GPU; on the CPU it computes in fp32, because CPUs
    without bf16/fp16 matrix units run half types many times slower."""
    if requested != "auto":
        return DTYPES[requested]
    if device.type == "cpu":
        return torch.float32
    return DTYPES.get(str(args.torch_dtype).replace("torch.", ""), torch.float32)


def hf_name(name: str, names: MoeWeightNames) -> str:
    """Our module's parameter name -> the checkpoint's tensor name (the family's MoeWeightNames.checkpoint_name)."""
    return names.checkpoint_name(name)


def load_dense(model: MoeTransformer, ckpt: Checkpoint, names: MoeWeightNames, dtype, device,
               quant_types: dict[str, str] | None = None) -> None:
    """The checkpoint's dense weights into `model` on `device`; those in quant_types (Wisp name -> type name,
    engine.quant.dense_quant) quantized on the host and held as quantized layers, only their blocks on the device."""
    state, quantized, fp32, quant_types = {}, {}, fp32_parameter_names(model), quant_types or {}
    for name, param in model.named_parameters():
        if name == "lm_head.weight" and model.args.tie_word_embeddings and not ckpt.has("lm_head.weight"):
            continue
        tensor = ckpt.get(names.checkpoint_name(name), tuple(param.shape))
        if name in quant_types:
            quantized[name] = quantize_weight(tensor, quant_types[name], device)
            continue
        target = torch.float32 if name in fp32 else dtype
        # Always a copy: a tensor of the memory-mapped file is aligned to 8 bytes only, and MKL's GEMM gives other
        # bits for other alignments on some CPUs (its AVX and SSE paths); torch's allocations are 64-byte aligned,
        # as the GGUF loader's are, so a checkpoint and its GGUF file compute the same bits everywhere.
        state[name] = torch.nn.Parameter(tensor.to(device=device, dtype=target, copy=True), requires_grad=False)
    tied = "lm_head.weight" not in state and "lm_head.weight" not in quantized
    if tied and "embed_tokens.weight" in quantized:  # lm_head reads the embedding's blocks
        quantized["lm_head.weight"] = quantized["embed_tokens.weight"]
    elif tied:
        state["lm_head.weight"] = state["embed_tokens.weight"]
    install_quantized(model, quantized, dtype)
    model.load_state_dict(state, strict=True, assign=True)


def quantized_dense_sizes(args: ModelArgs, dtype_bytes: int, dense_quant: str) -> ModelSizes:
    """engine.model.sizes.model_sizes of a checkpoint that load_weights quantizes the dense weights of."""
    tree = meta_model(args)
    return sizes_in_blocks(model_sizes(args, dtype_bytes), tree, quantized_types(tree, args, dense_quant))


def load_experts(store: ExpertStore, args: ModelArgs, ckpt: Checkpoint, names: MoeWeightNames, progress: Progress | None):
    """Pack each expert straight from the mmapped checkpoint into its block: no second full copy in RAM."""
    D, I = args.expert_hidden_size, args.moe_intermediate_size
    layout = store.layout
    for done, (layer, blocks) in enumerate(store.blocks.items()):
        fused = ckpt.has(names.fused_weight(layer, "gate_up_proj"))
        if fused and is_stacked_transposed(ckpt, names.fused_weight(layer, "gate_up_proj"), D, I):
            gate_up = ckpt.get(names.fused_weight(layer, "gate_up_proj"), (args.num_experts, D, 2 * I)).transpose(1, 2)
            down = ckpt.get(names.fused_weight(layer, "down_proj"), (args.num_experts, I, D)).transpose(1, 2)
        elif fused:
            gate_up = ckpt.get(names.fused_weight(layer, "gate_up_proj"), (args.num_experts, 2 * I, D))
            down = ckpt.get(names.fused_weight(layer, "down_proj"), (args.num_experts, D, I))
        for row, e in enumerate(store.held(layer)):
            if fused:
                layout.pack(blocks[row], gate_up[e, :I], gate_up[e, I:], down[e])
            else:
                layout.pack(
                    blocks[row],
                    ckpt.get(names.expert_weight(layer, e, names.gate), (I, D)),
                    ckpt.get(names.expert_weight(layer, e, names.up), (I, D)),
                    ckpt.get(names.expert_weight(layer, e, names.down), (D, I)),
                )
        if progress:
            progress((done + 1) / len(store.blocks), f"experts of layer {layer}")


def expert_activation(args: ModelArgs):
    """What runs between an expert's projections (engine.experts.formats.activation)."""
    if args.experts.activation == "clamped_swiglu":
        return ClampedSwiGlu(args.experts.swiglu_alpha, args.experts.swiglu_limit)
    if args.experts.activation == "gelu_tanh_glu":
        return GELU_TANH_GLU
    if args.experts.activation == "relu_squared":
        return RELU_SQUARED
    return SILU_GLU


@dataclass
class LoadedWeights:
    args: ModelArgs
    model: MoeTransformer
    store: ExpertStore
    dtype: torch.dtype
    dense_bytes: int | None = None  # device bytes of the dense weights where not the config's at dtype (quantized)


def load_weights(folder: Path, device: torch.device, dtype: str, expert_device: torch.device | None = None,
                 pin_experts: bool = False, progress: Progress | None = None,
                 plan_tier: TierPlanner | None = None, dense_quant: str | None = None) -> LoadedWeights:
    """Dense weights go to `device` (dense_quant: the linear layers and the embedding quantized to that type,
    engine.quant.dense_quant); experts to `expert_device` (default: the same). plan_tier(layers, experts,
    row bytes) picks the rows held in memory; the others are read from the checkpoint on a miss."""
    args = read_args(folder)
    known = family(args.model_type)
    names = known.weight_names
    torch_dtype = resolve_dtype(dtype, args, device)
    ckpt = Checkpoint(folder)
    model = meta_model(args)
    quant_types = quantized_types(model, args, dense_quant) if dense_quant else None
    load_dense(model, ckpt, names, torch_dtype, device, quant_types)
    model.attach_rotary(device)
    model.eval()
    moe_layers = [i for i, is_moe in enumerate(args.moe_layers) if is_moe]
    biases = load_expert_biases(ckpt, args, names, moe_layers, torch_dtype, device) if args.experts.bias else None
    if args.experts.quant:  # kept in the checkpoint's blocks (engine.quant)
        layout, fill = mxfp4_layout(args, moe_layers, expert_activation(args), biases), load_mxfp4_experts
    else:
        layout = DenseLayout(args.expert_hidden_size, args.moe_intermediate_size, torch_dtype, expert_activation(args),
                             biases)
        fill = load_interleaved_experts if known.interleaved_experts else load_experts
    # The host tier maps rows of per-expert checkpoint tensors; gpt-oss's fused expert tensors are held whole.
    tier = plan_tier(moe_layers, args.num_experts, layout.expert_bytes) if plan_tier and fill is load_experts else None
    store = ExpertStore(layout, moe_layers, args.num_experts, expert_device or device, pin=pin_experts, tier=tier)
    fill(store, args, ckpt, names, progress)
    if not store.is_complete:
        store.mapped = CheckpointRows(ckpt, names, args, layout)
    return LoadedWeights(args=args, model=model, store=store, dtype=torch_dtype)
