"""Synthetic weights with real geometry, generated on the GPU (randn on the CPU is far too slow for 57 GiB)
and packed into the same ExpertStore the real loader fills, so the copy and compute path is the real one."""

from __future__ import annotations

import torch

from engine.experts.formats.activation import ExpertBias
from engine.quant.dense_layout import DenseLayout
from engine.experts.formats.store import ExpertStore
from engine.model.args import ModelArgs
from engine.model.fp32_parameters import fp32_parameter_names
from engine.model.loader import DTYPES, LoadedWeights, expert_activation
from engine.model.model_tree import meta_model
from engine.model.transformer import MoeTransformer

WEIGHT_STD = 0.02


def synthetic_dense(args: ModelArgs, dtype: torch.dtype, device: torch.device, seed: int = 0,
                    quant_types: dict[str, str] | None = None, merge_qkv: bool = False) -> MoeTransformer:
    """Random dense weights in dtype; the parameters quant_types names ({Wisp name: type}, e.g.
    engine.quant.dense_file_types.dense_types) are random valid blocks of that type in quantized layers (with
    merge_qkv the attention projections merged as a GGUF file's are, engine.quant.merged_projections)."""
    from engine.quant.dense import dense_spec, install_quantized
    from engine.quant.merged_projections import merge_projections
    from engine.quant.synthetic import random_blocks

    generator = torch.Generator(device=device).manual_seed(seed)
    model = meta_model(args)
    quant_types = quant_types or {}
    shapes = {name: tuple(param.shape) for name, param in model.named_parameters()}
    blocks = {}
    for name, kind in quant_types.items():
        spec = dense_spec(kind, shapes[name])
        blocks[name] = (random_blocks(spec, 1, generator, device).reshape(-1), spec)
    if "embed_tokens.weight" in blocks and args.tie_word_embeddings:
        blocks["lm_head.weight"] = blocks["embed_tokens.weight"]
    install_quantized(model, blocks, dtype)
    state, fp32 = {}, fp32_parameter_names(model)
    for name, param in model.named_parameters():
        param_dtype = torch.float32 if name in fp32 else dtype  # as the loader keeps them (DeepSeek-style routers)
        if name.endswith("norm.weight"):
            tensor = torch.ones(param.shape, dtype=param_dtype, device=device)
        else:
            tensor = torch.randn(param.shape, generator=generator, dtype=param_dtype, device=device) * WEIGHT_STD
        state[name] = torch.nn.Parameter(tensor, requires_grad=False)
    model.load_state_dict(state, strict=True, assign=True)
    if merge_qkv:
        merge_projections(model)
    model.attach_rotary(device)
    return model.eval()


def synthetic_experts(args: ModelArgs, dtype: torch.dtype, gpu: torch.device, host: bool, seed: int = 1) -> ExpertStore:
    """Experts generated layer by layer on `gpu`, kept there (host=False) or copied into pinned host memory."""
    moe_layers = [i for i, is_moe in enumerate(args.moe_layers) if is_moe]
    biases = synthetic_biases(args, moe_layers, dtype, gpu) if args.experts.bias else None
    layout = DenseLayout(args.expert_hidden_size, args.moe_intermediate_size, dtype, expert_activation(args), biases)
    store = ExpertStore(layout, moe_layers, args.num_experts, "cpu" if host else gpu, pin=host)
    generator = torch.Generator(device=gpu).manual_seed(seed)
    for layer in moe_layers:
        block = torch.randn(args.num_experts, layout.numel, generator=generator, dtype=dtype, device=gpu)
        store.blocks[layer].copy_(block.mul_(WEIGHT_STD))
    if gpu.type == "cuda":
        torch.cuda.synchronize(gpu)
    return store


def synthetic_biases(args: ModelArgs, moe_layers: list[int], dtype, gpu: torch.device) -> dict[int, ExpertBias]:
    """Expert biases (gpt_oss), resident on the compute device as the loader keeps them."""
    generator = torch.Generator(device=gpu).manual_seed(2)
    E, D, I = args.num_experts, args.expert_hidden_size, args.moe_intermediate_size

    def random(*shape):
        return torch.randn(shape, generator=generator, dtype=dtype, device=gpu) * WEIGHT_STD

    return {layer: ExpertBias(gate_up=random(E, 2 * I), down=random(E, D)) for layer in moe_layers}


def synthetic_weights(args: ModelArgs, gpu: torch.device, experts_on_host: bool,
                      dtype: torch.dtype | None = None, quant: str | None = None,
                      dense_weights: str = "file") -> LoadedWeights:
    """dtype: the shape's own (torch_dtype) unless given. quant: a GGUF file type (Q4_K_M, Q8_0, ...) whose expert
    types the experts get (random valid blocks, engine.quant.synthetic), and (dense_weights "file") whose dense
    types llama.cpp's quantizer gives the dense tensors (engine.quant.dense_file_types); dense_weights "dtype", or
    no quant, keeps the dense weights in dtype."""
    dtype = dtype or DTYPES[args.torch_dtype or "bfloat16"]
    model, held = synthetic_dense_weights(args, dtype, gpu, quant, dense_weights)
    host = experts_on_host and gpu.type == "cuda"
    if quant is None:
        store = synthetic_experts(args, dtype, gpu, host=host)
    else:
        from engine.quant.file_types import expert_types
        from engine.quant.synthetic import synthetic_quant_experts

        moe_layers = [i for i, is_moe in enumerate(args.moe_layers) if is_moe]
        biases = synthetic_biases(args, moe_layers, dtype, gpu) if args.experts.bias else None
        types = expert_types(quant, moe_layers, args.num_hidden_layers, args.expert_hidden_size,
                             args.moe_intermediate_size)
        store = synthetic_quant_experts(args, types, gpu, host, activation=expert_activation(args), biases=biases)
    return LoadedWeights(args=args, model=model, store=store, dtype=dtype, dense_bytes=held)


def synthetic_dense_weights(args: ModelArgs, dtype: torch.dtype, gpu: torch.device, quant: str | None,
                            dense_weights: str = "file", merge_qkv: bool = False) -> tuple[MoeTransformer, int | None]:
    """(the dense model synthetic_weights builds, its device bytes where quantized, else None)."""
    from engine.quant.dense_file_types import dense_types
    from engine.quant.quant_modules import planned_dense_bytes

    quant_types = dense_types(quant, meta_model(args), args) if quant and dense_weights == "file" else None
    model = synthetic_dense(args, dtype, gpu, quant_types=quant_types, merge_qkv=merge_qkv)
    return model, planned_dense_bytes(model, dtype.itemsize) if quant_types else None


class IdOnlyTokenizer:
    """Benchmarks feed token ids and never read text: a tokenizer that decodes to no text and has no EOS (an
    engine.text.detokenizer.Decoder, so the engine's text stream runs as for a real tokenizer)."""

    eos_token_ids = frozenset()
    special_token_ids = frozenset()
    has_chat_template = False

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return ""
