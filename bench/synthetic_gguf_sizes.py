"""Bytes of bench/synthetic_gguf.py's files for a shape, before any is written: the f16 template (exact) and the
assembled file of a k-quant file type (an estimate by llama.cpp's quantizer rules), so the head-to-head script
can make room on the disk and a plan can be checked against the disk, RAM and time of a device call.

The estimate's types: routed experts as engine.quant.file_types gives them (exact); output.weight Q6_K (Q8_0 in a
Q8_0 file);
attn_v, a DeltaNet's attn_qkv and ffn_down_shexp the richer down type in the layers use_more_bits picks (one attn_v
or attn_qkv counted per layer, as the quantizer does); every other matrix the file type's base type; tensors kept
f32 stay f32. A quantized template's exact file bytes are `assembled_bytes` of bench/synthetic_gguf.py."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from engine.model.args import ModelArgs
from engine.model.shapes import shape
from engine.quant.file_types import FILE_TYPES, down_type, expert_types, fallback_type
from engine.quant.types import quant_type

RICHER = re.compile(r"blk\.(\d+)\.(attn_v|attn_qkv|ffn_down_shexp)\.weight$")
EXPERT = re.compile(r"blk\.(\d+)\.ffn_(gate|up|down)_exps\.weight$")
OUTPUT_TYPE = "Q6_K"  # llama.cpp's output.weight in every k-quant file type


@dataclass(frozen=True)
class SyntheticSizes:
    template_f16: int  # bytes of `template`'s f16 file
    template_quantized: int  # the same tensors at the file type (estimate)
    assembled: int  # the whole file of the shape's layers at the file type (estimate)

    @property
    def peak_disk(self) -> int:
        """The most the steps hold at once: the f16 template beside its quantized copy, then that copy beside the
        assembled file (the script deletes the f16 template before assembling)."""
        return max(self.template_f16 + self.template_quantized, self.template_quantized + self.assembled)


def tensor_bytes(name: str, dims: tuple[int, ...], f32: bool, file_type: str, num_layers: int) -> int:
    """Bytes of one tensor (numpy dims, rows last) of a `num_layers`-layer file of `file_type`."""
    count = math.prod(dims)
    if f32:
        return 4 * count
    row = dims[-1]
    expert, richer = EXPERT.match(name), RICHER.match(name)
    if expert:
        layer = int(expert.group(1))
        gate, up, down = expert_types(file_type, [layer], num_layers, row if expert.group(2) != "down" else dims[-2],
                                      row if expert.group(2) == "down" else dims[-2])[layer]
        kind = {"gate": gate, "up": up, "down": down}[expert.group(2)]
    elif name == "output.weight":
        kind = fallback_type("Q8_0" if FILE_TYPES[file_type][0] == "Q8_0" else OUTPUT_TYPE, row)
    elif richer:
        kind = fallback_type(down_type(file_type, int(richer.group(1)), num_layers), row)
    else:
        kind = fallback_type(FILE_TYPES[file_type][0], row)
    return quant_type(kind).row_bytes(row) * (count // row)


def file_bytes(tensors, file_type: str, num_layers: int) -> int:
    """tensors: (GGUF name, numpy dims, stored f32) as bench/synthetic_gguf.template_tensors gives them."""
    return sum(tensor_bytes(name, dims, f32, file_type, num_layers) for name, dims, f32 in tensors)


def synthetic_sizes(name: str, file_type: str = "Q4_K_M") -> SyntheticSizes:
    """The sizes of the shape's template and of its assembled file at its published layer count."""
    from bench.synthetic_gguf import template_args

    return sizes_of(template_args(name), shape(name), file_type)  # the shape's own layer kinds (interval 4)


def sizes_of(template: ModelArgs, whole: ModelArgs, file_type: str) -> SyntheticSizes:
    """The sizes of a template of `template` and of the file of `whole` assembled from it."""
    from bench.synthetic_gguf import template_tensors

    template_list = template_tensors(template)
    f16 = sum((4 if f32 else 2) * math.prod(dims) for _, dims, f32 in template_list)
    return SyntheticSizes(f16, file_bytes(template_list, file_type, template.num_hidden_layers),
                          file_bytes(template_tensors(whole), file_type, whole.num_hidden_layers))
