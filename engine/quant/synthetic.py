"""Synthetic quantized experts with a real file's geometry and types, generated on the GPU: random valid blocks
(every f16 scale finite and small, so a model on them computes finite values), for benchmarks and tests."""

from __future__ import annotations

import torch

from engine.experts.formats.store import ExpertStore
from engine.quant.layout import QuantLayout
from engine.quant.linear import QuantLinearSpec
from engine.experts.formats.activation import SILU_GLU
from engine.quant.types import (BF16, F16, F32, IQ4_NL, IQ4_XS, MXFP4, Q2_K, Q3_K, Q4_0, Q4_1, Q4_K, Q5_0, Q5_1, Q5_K,
                               Q6_K, Q8_0)

WEIGHT_SCALE = 0.05  # the largest |weight| a block can hold
MXFP4_TOP_SCALE = 120  # E8M0 byte: e2m1's largest value 6 times 2^(120 - 127) is 0.047, below WEIGHT_SCALE
# of d in a dequantized weight (Q4_1, Q5_1: d * q + m, m below the same cap: one more multiple; Q2_K: 15 * 3 of d
# and 15 of dmin)
LARGEST_MULTIPLE = {Q8_0: 128, Q4_K: 63 * 15, Q5_K: 63 * 31, Q6_K: 128 * 32, Q4_0: 8, Q4_1: 16, Q5_0: 16, Q5_1: 32,
                    Q3_K: 32 * 4, Q2_K: 15 * 3 + 15, IQ4_NL: 127, IQ4_XS: 32 * 127}
FLOAT_TYPES = {F32: torch.float32, F16: torch.float16, BF16: torch.bfloat16}


def random_blocks(spec: QuantLinearSpec, count: int, generator: torch.Generator, device) -> torch.Tensor:
    """uint8 [count, spec.nbytes]: count random matrices of spec's type and shape."""
    if spec.qtype in FLOAT_TYPES:
        values = torch.rand(count, spec.out_features * spec.in_features, generator=generator, device=device)
        return ((values * 2 - 1) * WEIGHT_SCALE).to(FLOAT_TYPES[spec.qtype]).view(torch.uint8)
    blocks = torch.randint(0, 256, (count * spec.nbytes // spec.qtype.block_bytes, spec.qtype.block_bytes),
                           dtype=torch.uint8, generator=generator, device=device)
    for offset in spec.qtype.f16_scale_offsets:
        scale = torch.rand(blocks.shape[0], 1, generator=generator, device=device)
        scale = (scale * WEIGHT_SCALE / LARGEST_MULTIPLE[spec.qtype]).to(torch.float16)
        blocks[:, offset : offset + 2] = scale.view(torch.uint8)
    if spec.qtype is MXFP4:
        blocks[:, 0] = MXFP4_TOP_SCALE - torch.randint(0, 8, (blocks.shape[0],), dtype=torch.uint8,
                                                        generator=generator, device=device)
    return blocks.view(count, spec.nbytes)


def synthetic_quant_experts(args, types_by_layer: dict[int, tuple], gpu: torch.device, host: bool,
                            seed: int = 1, activation=SILU_GLU, biases: dict | None = None) -> ExpertStore:
    """Every MoE layer of args (engine.model.args.ModelArgs) with types_by_layer[layer] = (gate, up, down) types,
    generated layer by layer on `gpu` and kept there (host=False) or copied into pinned host memory; activation
    and biases ({layer: ExpertBias}, resident): the experts' (engine.experts.formats.activation)."""
    layout = QuantLayout(args.expert_hidden_size, args.moe_intermediate_size, types_by_layer, activation, biases)
    store = ExpertStore(layout, list(types_by_layer), args.num_experts, "cpu" if host else gpu,
                        pin=host and gpu.type == "cuda")
    generator = torch.Generator(device=gpu).manual_seed(seed)
    for layer in types_by_layer:
        fmt = layout.for_layer(layer)
        rows = torch.zeros(args.num_experts, fmt.slot_bytes, dtype=torch.uint8, device=gpu)
        for spec in (fmt.gate, fmt.up, fmt.down):
            rows[:, spec.byte_offset : spec.end] = random_blocks(spec, args.num_experts, generator, gpu)
        store.blocks[layer].copy_(rows)
    if gpu.type == "cuda":
        torch.cuda.synchronize(gpu)
    return store
