"""Dense layers that keep a GGUF tensor's blocks on the device instead of a float copy: QuantLinear (attention
projections, shared experts, dense MLPs, lm_head) and QuantEmbedding (the token embedding). A step of at most
GEMV_ROWS rows (decode) runs the quantized GEMV of engine.quant.linear, each row alone and in a fixed order; a
longer step (a prompt) dequantizes the weight to the activations' dtype, at most DEQUANT_TILE_BYTES of it at a time,
and multiplies; on CUDA, steps of up to quant_matmul.AUTO_MAX_ROWS rows run the GEMM of engine.quant.quant_matmul
instead, which dequantizes weight tiles inside its K loop. Which runs depends on the step's row count and the device
alone. On the CPU both are the torch reference with the same math
(fp32 weights, so the dequantized weight is exact)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.quant.linear import QuantLinearSpec, dequantize, dequantize_rows, gathered_gemv
from engine.quant.quant_matmul import quant_matmul, runs_fused

GEMV_ROWS = 8  # steps of at most this many rows multiply the blocks in place (the decode GEMV)
DEQUANT_TILE_BYTES = 64 * 2**20  # the most of a weight a longer step dequantizes at once (its scratch)


def tile_rows(spec: QuantLinearSpec, dtype_bytes: int) -> int:
    """Output rows of one dequantized tile: as many as fit DEQUANT_TILE_BYTES, at least one, at most all."""
    return max(1, min(spec.out_features, DEQUANT_TILE_BYTES // (spec.in_features * dtype_bytes)))


def scratch_bytes(spec: QuantLinearSpec, dtype_bytes: int) -> int:
    """Device bytes a long step's dequantized tile of this matrix takes while it multiplies."""
    return tile_rows(spec, dtype_bytes) * spec.in_features * dtype_bytes


class QuantLinear(nn.Module):
    """y = x W^T (+ bias) with W in `blocks` (uint8 [spec.nbytes], never dequantized in place); the bias, where the
    layer has one, is a float parameter (loaded as nn.Linear's is, `assign`ed from the state dict). `parts`: the
    matrices W stacks along its rows (engine.quant.merged_projections), at their byte offsets in `blocks`; one, W
    itself, unless merged. forward(x, split=True) gives each part's output."""

    def __init__(self, blocks: torch.Tensor, spec: QuantLinearSpec, bias: bool = False,
                 parts: tuple[QuantLinearSpec, ...] | None = None):
        super().__init__()
        self.spec, self.in_features, self.out_features = spec, spec.in_features, spec.out_features
        self.parts = parts or (spec,)
        self.register_buffer("blocks", blocks.reshape(-1), persistent=False)
        self.register_buffer("gemv_rows", torch.zeros(GEMV_ROWS, dtype=torch.int64, device=blocks.device),
                             persistent=False)  # every GEMV entry reads the one matrix (slot 0 of a 1-row table)
        self.bias = nn.Parameter(torch.empty(spec.out_features, device="meta"), requires_grad=False) if bias else None

    @property
    def weight_bytes(self) -> int:
        return self.blocks.numel()

    def forward(self, x: torch.Tensor, split: bool = False) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """x [..., in] -> [..., out]; split: each part's output [..., part rows] instead (views of the one output,
        but in a long step that dequantizes each part runs as the part's own layer would)."""
        rows = x.reshape(-1, self.in_features)
        if len(self.parts) > 1 and rows.shape[0] > GEMV_ROWS and not runs_fused(rows, self.spec):
            outputs = self.dequantized_parts(rows)
            outputs = tuple(out.view(*x.shape[:-1], out.shape[-1]) for out in outputs)
            return outputs if split else torch.cat(outputs, dim=-1)
        if rows.shape[0] == 0:
            out = rows.new_empty(0, self.out_features)
        elif rows.shape[0] <= GEMV_ROWS:
            out = gathered_gemv(rows, self.blocks.view(1, -1), self.gemv_rows[: rows.shape[0]], self.spec)
            if self.bias is not None:
                out = out + self.bias
        elif runs_fused(rows, self.spec):
            out = quant_matmul(rows, self.blocks, self.spec)
            if self.bias is not None:
                out = out + self.bias
        else:
            out = dequantized_linear(rows, self.blocks, self.spec, self.bias)
        out = out.view(*x.shape[:-1], self.out_features)
        return out.split([part.out_features for part in self.parts], dim=-1) if split else out

    def dequantized_parts(self, rows: torch.Tensor) -> list[torch.Tensor]:
        """rows [T, in] through each part's dequantized_linear: the tiles and GEMMs of the part's own layer, so its
        bits (a float GEMM's bits may change with its shape) -> [T, part rows] each."""
        outputs, start = [], 0
        for part in self.parts:
            bias = None if self.bias is None else self.bias[start : start + part.out_features]
            outputs.append(dequantized_linear(rows, self.blocks, part, bias))
            start += part.out_features
        return outputs

    def extra_repr(self) -> str:
        return (f"{self.spec.qtype.name}, in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


def dequantized_linear(x: torch.Tensor, blocks: torch.Tensor, spec: QuantLinearSpec,
                       bias: torch.Tensor | None) -> torch.Tensor:
    """x [T, in] times the matrix dequantized to x.dtype, a tile of output rows at a time -> [T, out]."""
    rows = tile_rows(spec, x.element_size())
    if rows == spec.out_features:
        return F.linear(x, dequantize(blocks, spec, x.dtype), bias)
    out = x.new_empty(x.shape[0], spec.out_features)
    for start in range(0, spec.out_features, rows):
        count = min(rows, spec.out_features - start)
        tile = QuantLinearSpec(spec.qtype, count, spec.in_features, spec.byte_offset + start * spec.row_bytes)
        part = None if bias is None else bias[start : start + count]
        out[:, start : start + count] = F.linear(x, dequantize(blocks, tile, x.dtype), part)
    return out


class QuantEmbedding(nn.Module):
    """The token embedding in its blocks: a lookup dequantizes only the rows it reads, to `dtype`."""

    def __init__(self, blocks: torch.Tensor, spec: QuantLinearSpec, dtype: torch.dtype):
        super().__init__()
        self.spec, self.dtype = spec, dtype
        self.num_embeddings, self.embedding_dim = spec.out_features, spec.in_features
        self.register_buffer("blocks", blocks.reshape(-1), persistent=False)

    @property
    def weight_bytes(self) -> int:
        return self.blocks.numel()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return dequantize_rows(self.blocks, self.spec, ids, self.dtype)

    def extra_repr(self) -> str:
        return f"{self.spec.qtype.name}, {self.num_embeddings}, {self.embedding_dim}"


def embedding_place(embedding: nn.Module) -> tuple[torch.device, torch.dtype]:
    """(device, dtype) of the hidden states an embedding (nn.Embedding or QuantEmbedding) produces."""
    if isinstance(embedding, QuantEmbedding):
        return embedding.blocks.device, embedding.dtype
    return embedding.weight.device, embedding.weight.dtype


def weight_bytes(model: nn.Module) -> int:
    """Device bytes of a model's weights: its parameters and the blocks of its quantized layers, each storage
    once (a tied lm_head shares the embedding's)."""
    seen, total = set(), 0
    blocks = [m.blocks for m in model.modules() if isinstance(m, (QuantLinear, QuantEmbedding))]
    for tensor in [*model.parameters(), *blocks]:
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tensor.numel(), tensor.dtype)
        if key not in seen:
            seen.add(key)
            total += tensor.numel() * tensor.element_size()
    return total


def planned_dense_bytes(model: nn.Module, dtype_bytes: int) -> int:
    """What a model's dense weights take on the device: weight_bytes, plus the scratch of the largest tile a long
    step dequantizes (the memory plan's dense_bytes; a merged layer dequantizes its parts one at a time)."""
    layers = [m for m in model.modules() if isinstance(m, QuantLinear)]
    scratch = [scratch_bytes(part, dtype_bytes) for m in layers for part in m.parts]
    return weight_bytes(model) + max(scratch, default=0)
