"""The draft (multi-token-prediction) layer of a GGUF file, as llama.cpp's converter writes it: one more block
`blk.{n}` after the model's n layers, counted in block_count and in `{arch}.nextn_predict_layers`, holding the
decoder layer's tensors under the usual names and the nextn tensors (eh_proj over [embedding | hidden], enorm,
hnorm, shared_head_norm, shared_head_head where the checkpoint has its own head, embed_tokens where it has its own
embedding). GgufFormat.nextn says which families' files have it (llama.cpp's glm4moe). convert-gguf writes it
(draft_layer_specs) and --speculative mtp reads it (GgufDraftTensors), dequantized to the compute dtype."""

from __future__ import annotations

from typing import Iterator

import torch

from engine.gguf.model_file import GgufModel
from engine.gguf.param_names import gguf_name
from engine.gguf.tensor_map import as_f32
from engine.model.args import ModelArgs
from engine.model.families.tensor_spec import TensorSpec
from engine.model.mtp_names import NEXTN, DraftLayerNames

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
    if not model.format.nextn:
        return None, (f"is a GGUF file of llama.cpp's '{arch}', whose draft (MTP) layer Wisp does not read from "
                      "GGUF"), False
    index = args.num_hidden_layers
    if not int(model.file.get(f"{arch}.nextn_predict_layers") or 0):
        return None, "has no draft (MTP) layers", False
    if f"blk.{index}.{NEXTN_TENSORS['proj.weight']}" not in model.file.tensors:
        return None, f"declares draft (MTP) layers, but holds no blk.{index}.nextn tensors", False
    return NEXTN, "", f"blk.{index}.{NEXTN_TENSORS['head.weight']}" in model.file.tensors


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
    """convert-gguf: the nextn draft layer of the checkpoint in folder as blk.{n}: the decoder layer's tensors in
    Wisp's parameter order, the nextn ones, then its experts stacked as the model's layers'."""
    from engine.gguf.named_specs import keeps_f32
    from engine.gguf.tensor_map import layer_expert_specs
    from engine.model.families import family
    from engine.model.mtp import DraftLayer
    from engine.model.mtp_loader import CheckpointDraftTensors

    weights, index = family(args.model_type).weight_names, args.num_hidden_layers
    tensors = CheckpointDraftTensors(folder, args, weights, NEXTN)
    with torch.device("meta"):
        layer = DraftLayer(args, NEXTN, has_head=tensors.has_head())
    specs = []
    for param, value in layer.named_parameters():
        name, shape = draft_tensor_name(param, args, arch), tuple(value.shape)
        specs.append(TensorSpec(name, shape, _dense_loader(tensors, param, shape), keeps_f32(name, shape)))
    embed = f"{NEXTN.layer_prefix(index)}embed_tokens.weight"
    if tensors.ckpt.has(embed):
        shape = (args.vocab_size, args.hidden_size)
        specs.append(TensorSpec(f"blk.{index}.{EMBEDDING}", shape, lambda: as_f32(tensors.ckpt.get(embed, shape))))
    return specs + layer_expert_specs(args, tensors.ckpt, weights, index)


def _dense_loader(tensors, param: str, shape: tuple[int, ...]):
    return lambda: as_f32(tensors.dense(param, shape))
