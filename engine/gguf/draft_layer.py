"""The draft (multi-token-prediction) layer of a GGUF file, as llama.cpp's converter writes it: one more block
`blk.{n}` after the model's n layers, counted in block_count and in `{arch}.nextn_predict_layers`, holding the
decoder layer's tensors under the usual names and the nextn tensors (eh_proj over [embedding | hidden], enorm,
hnorm, shared_head_norm, shared_head_head where the checkpoint has its own head, embed_tokens where it has its own
embedding). GgufFormat.nextn says which families' files have it (llama.cpp's glm4moe, qwen35moe, qwen3next).
Whatever the checkpoint's layout (nextn, or Qwen's mtp.*: fc is eh_proj, pre_fc_norm_embedding enorm,
pre_fc_norm_hidden hnorm, norm shared_head_norm), the file holds the layer in the family's GGUF layout
(zero-centred norms with their 1 added, as the model's layers). convert-gguf writes it (draft_layer_specs) and
--speculative mtp reads it (GgufDraftTensors), dequantized to the compute dtype."""

from __future__ import annotations

from typing import Iterator

import numpy as np
import torch

from engine.gguf.model_file import GgufModel
from engine.gguf.param_names import gguf_name
from engine.gguf.tensor_map import as_f32
from engine.model.args import ModelArgs
from engine.model.families import family
from engine.model.families.tensor_spec import TensorSpec
from engine.model.mtp_names import DraftLayerNames

# DraftLayer's parameters outside the decoder layer -> their tensor within blk.{n}
NEXTN_TENSORS = {"embed_norm.weight": "nextn.enorm.weight", "hidden_norm.weight": "nextn.hnorm.weight",
                 "proj.weight": "nextn.eh_proj.weight", "norm.weight": "nextn.shared_head_norm.weight",
                 "head.weight": "nextn.shared_head_head.weight"}
EMBEDDING = "nextn.embed_tokens.weight"  # written where the checkpoint has the layer's own copy; Wisp reads the model's


def draft_tensor_name(param: str, args: ModelArgs, arch: str) -> str:
    """A DraftLayer parameter -> its GGUF tensor: the decoder layer's as a layer at index n, the rest nextn.*."""
    index = args.num_hidden_layers
    if param.startswith("layer."):
        return gguf_name(f"layers.{index}.{param[len('layer.'):]}", arch)
    return f"blk.{index}.{NEXTN_TENSORS[param]}"


def gguf_draft_layer(model: GgufModel) -> tuple[DraftLayerNames | None, str, bool]:
    """(the layout of the draft layer the file holds, or None; why not, where None; whether it has its own head),
    as engine.model.mtp_loader.runnable_draft_layer says it of a checkpoint folder."""
    args, arch = model.args, model.architecture
    names = family(args.model_type).draft_layer
    if names is None:
        return None, "has no draft (MTP) layers", False
    if not int(model.file.get(f"{arch}.nextn_predict_layers") or 0):
        return None, "has no draft (MTP) layers", False
    if not model.format.nextn:
        return None, (f"is a GGUF file of llama.cpp's '{arch}', whose draft (MTP) layer Wisp does not read from "
                      "GGUF"), False
    index = args.num_hidden_layers
    if f"blk.{index}.{NEXTN_TENSORS['proj.weight']}" not in model.file.tensors:
        return None, f"declares draft (MTP) layers, but holds no blk.{index}.nextn tensors", False
    head = f"blk.{index}.{NEXTN_TENSORS['head.weight']}"
    return names, "", names.head_name(index) is not None and head in model.file.tensors


class GgufDraftTensors:
    """engine.model.mtp_loader.DraftTensors of a GGUF file: each tensor dequantized (a copy; the file stays mapped)."""

    def __init__(self, model: GgufModel):
        self.model, self.args = model, model.args
        self.index = self.args.num_hidden_layers

    def has_layer(self) -> bool:
        return gguf_draft_layer(self.model)[0] is not None

    def missing(self) -> str:
        return f"{self.model.path}: {gguf_draft_layer(self.model)[1]}"

    def has_head(self) -> bool:
        return gguf_draft_layer(self.model)[2]

    def dense(self, param: str, shape: tuple[int, ...]) -> torch.Tensor:
        name = draft_tensor_name(param, self.args, self.model.architecture)
        return self.model.named_dense(f"draft {param}", name, shape).dequantize(torch.float32).reshape(shape)

    def experts(self) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        layer = self.model.layer_experts(self.index)
        for e in range(self.args.num_experts):
            yield tuple(t.dequantize_expert(e) for t in (layer.gate, layer.up, layer.down))


def draft_layer_specs(args: ModelArgs, folder, arch: str) -> list[TensorSpec]:
    """convert-gguf: the draft layer of the checkpoint in folder as blk.{n}, in the family's GGUF layout: the
    decoder layer's tensors and the nextn ones in Wisp's parameter order (size-1 dimensions dropped, zero-centred
    norms + 1), then its experts stacked as the model's layers'."""
    from engine.gguf.named_specs import keeps_f32
    from engine.model.families.tensor_spec import EXPERTS
    from engine.model.hybrid_layers import ZeroCenteredRMSNorm
    from engine.model.mtp import DraftLayer
    from engine.model.mtp_loader import CheckpointDraftTensors

    known, index = family(args.model_type), args.num_hidden_layers
    tensors = CheckpointDraftTensors(folder, args, known.weight_names, known.draft_layer)
    file_args = known.gguf.file_args(args) if known.gguf.file_args is not None else args
    with torch.device("meta"):
        layer = DraftLayer(file_args, known.draft_layer, has_head=tensors.has_head())
    centred = {f"{prefix}.weight" for prefix, module in layer.named_modules()
               if isinstance(module, ZeroCenteredRMSNorm)}
    specs = []
    for param, value in layer.named_parameters():
        name = draft_tensor_name(param, args, arch)
        shape = tuple(d for d in value.shape if d != 1) if value.dim() > 1 else tuple(value.shape)
        load = _dense_loader(tensors, param, tuple(value.shape), param in centred)
        specs.append(TensorSpec(name, shape, lambda load=load, shape=shape: load().reshape(shape),
                                keeps_f32(name, shape)))
    embed = f"{known.draft_layer.layer_prefix(index)}embed_tokens.weight"
    if known.draft_layer.style == "nextn" and tensors.ckpt.has(embed):
        shape = (args.vocab_size, args.hidden_size)
        specs.append(TensorSpec(f"blk.{index}.{EMBEDDING}", shape, lambda: as_f32(tensors.ckpt.get(embed, shape))))
    E, D, I = args.num_experts, args.hidden_size, args.moe_intermediate_size
    shapes = {"gate": (E, I, D), "up": (E, I, D), "down": (E, D, I)}
    return specs + [TensorSpec(f"blk.{index}.{EXPERTS[projection]}.weight", shape,
                               lambda projection=projection: as_f32(tensors.projection(projection)))
                    for projection, shape in shapes.items()]


def _dense_loader(tensors, param: str, shape: tuple[int, ...], centred: bool):
    if centred:  # llama.cpp's files hold a zero-centred norm's weight with its 1 added
        return lambda: as_f32(tensors.dense(param, shape)) + np.float32(1.0)
    return lambda: as_f32(tensors.dense(param, shape))
