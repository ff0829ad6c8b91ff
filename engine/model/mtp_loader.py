"""Read a checkpoint's draft (MTP / nextn) layer into engine.model.mtp's modules, on the device: from a safetensors
folder here (CheckpointDraftTensors), from a GGUF file's nextn tensors in engine.gguf.draft_layer."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Iterator, Protocol

import torch

from engine.errors import ModelFormatError
from engine.model.args import ModelArgs
from engine.model.attention import KVCache
from engine.model.checkpoint import Checkpoint
from engine.model.fp32_parameters import fp32_parameter_names
from engine.model.mtp import DraftExperts, DraftLayer, DraftModel, add_draft_pool
from engine.model.mtp_names import DraftLayerNames
from engine.model.transformer import MoeTransformer
from engine.model.weight_names import MoeWeightNames
from engine.quant.dense_layout import DenseLayout


DRAFT_LAYER_KEYS = ("mtp_num_hidden_layers", "num_nextn_predict_layers")  # Qwen3.5/Qwen3-Next; DeepSeek-V3/GLM-4.5


def count_draft_layers(config: dict) -> int:
    """The draft layers a checkpoint's config.json declares (a multimodal config's text_config included)."""
    found = [int(config.get(key) or 0) for key in DRAFT_LAYER_KEYS]
    nested = config.get("text_config")
    return max(found + ([count_draft_layers(nested)] if isinstance(nested, dict) else []))


def folder_draft_layers(folder: Path | None) -> int:
    try:
        return count_draft_layers(json.loads((Path(folder) / "config.json").read_text(encoding="utf-8")))
    except (OSError, TypeError, ValueError):
        return 0  # a GGUF file, or no readable config


def has_draft_layer(ckpt: Checkpoint, args: ModelArgs, names: DraftLayerNames | None) -> bool:
    """Does the checkpoint hold the draft layer's tensors? (transformers drops them when it saves a model.)"""
    return names is not None and ckpt.has(names.marker(args.num_hidden_layers))


def runnable_draft_layer(folder: Path | None, args: ModelArgs) -> tuple[DraftLayerNames | None, str, bool]:
    """(the layout of the draft layer the checkpoint in folder holds and Wisp runs, or None; why not, where None;
    whether it has its own output head)."""
    from engine.model.families import family

    if folder is None:
        return None, "is not a checkpoint folder, where Wisp reads draft layers", False
    names = family(args.model_type).draft_layer
    if not folder_draft_layers(folder) or names is None:
        return None, "has no draft (MTP) layers", False
    ckpt = Checkpoint(folder)
    if not has_draft_layer(ckpt, args, names):
        return None, "declares draft (MTP) layers, but its files hold no draft-layer tensors", False
    head = names.head_name(args.num_hidden_layers)
    return names, "", head is not None and ckpt.has(head)


def layer_tensor_name(param: str, args: ModelArgs, weights: MoeWeightNames, names: DraftLayerNames) -> str:
    """A DraftLayer parameter -> its checkpoint tensor: the decoder layer's as the family names a layer's, moved
    under the draft layer's prefix; the others from the layout's table."""
    index = args.num_hidden_layers
    if not param.startswith("layer."):
        return names.input_names(index)[param] if param != "head.weight" else names.head_name(index)
    as_main = weights.checkpoint_name(f"layers.{index}.{param[len('layer.'):]}")
    return names.layer_prefix(index) + as_main.split(f"layers.{index}.", 1)[1]


class DraftTensors(Protocol):
    """Where a draft layer's tensors are read from, by DraftLayer parameter name."""

    def has_layer(self) -> bool: ...
    def missing(self) -> str: ...  # the ModelFormatError's message where has_layer() is False
    def has_head(self) -> bool: ...
    def dense(self, param: str, shape: tuple[int, ...]) -> torch.Tensor: ...
    def experts(self) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]: ...  # (gate, up, down) each


class CheckpointDraftTensors:
    """The draft layer of the safetensors checkpoint in `folder`."""

    def __init__(self, folder, args: ModelArgs, weights: MoeWeightNames, names: DraftLayerNames):
        self.folder, self.args, self.weights, self.names = folder, args, weights, names
        self.ckpt = Checkpoint(folder)

    def has_layer(self) -> bool:
        return has_draft_layer(self.ckpt, self.args, self.names)

    def missing(self) -> str:
        return (f"{self.folder}: config.json declares draft (MTP) layers, but the checkpoint holds none of their "
                f"tensors ({self.names.marker(self.args.num_hidden_layers)})")

    def has_head(self) -> bool:
        head = self.names.head_name(self.args.num_hidden_layers)
        return head is not None and self.ckpt.has(head)

    def dense(self, param: str, shape: tuple[int, ...]) -> torch.Tensor:
        return self.ckpt.get(layer_tensor_name(param, self.args, self.weights, self.names), shape)

    def experts(self) -> Iterator[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
        """Per-expert tensors or transformers' stacked ones."""
        E, D, I = self.args.num_experts, self.args.hidden_size, self.args.moe_intermediate_size
        prefix = self.experts_prefix()
        if self.ckpt.has(prefix + "gate_up_proj"):
            gate_up = self.ckpt.get(prefix + "gate_up_proj", (E, 2 * I, D))
            down = self.ckpt.get(prefix + "down_proj", (E, D, I))
            yield from ((gate_up[e, :I], gate_up[e, I:], down[e]) for e in range(E))
            return
        for e in range(E):
            yield tuple(self.ckpt.get(f"{prefix}{e}.{name}.weight", shape) for name, shape in self.projections())

    def projection(self, projection: str) -> torch.Tensor:
        """One projection ("gate", "up" or "down") of every expert, stacked [E, out, in]."""
        E, D, I = self.args.num_experts, self.args.hidden_size, self.args.moe_intermediate_size
        prefix = self.experts_prefix()
        if self.ckpt.has(prefix + "gate_up_proj"):
            if projection == "down":
                return self.ckpt.get(prefix + "down_proj", (E, D, I))
            gate_up = self.ckpt.get(prefix + "gate_up_proj", (E, 2 * I, D))
            return gate_up[:, :I] if projection == "gate" else gate_up[:, I:]
        name, shape = dict(zip(("gate", "up", "down"), self.projections()))[projection]
        return torch.stack([self.ckpt.get(f"{prefix}{e}.{name}.weight", shape) for e in range(E)])

    def experts_prefix(self) -> str:
        return f"{self.names.layer_prefix(self.args.num_hidden_layers)}{self.weights.block}.experts."

    def projections(self) -> list[tuple[str, tuple[int, int]]]:
        """Each expert's (gate, up, down) checkpoint name within the expert and shape."""
        D, I, weights = self.args.hidden_size, self.args.moe_intermediate_size, self.weights
        return [(weights.gate, (I, D)), (weights.up, (I, D)), (weights.down, (D, I))]


def load_draft_dense(layer: DraftLayer, tensors: DraftTensors, dtype: torch.dtype, device: torch.device) -> None:
    fp32, state = fp32_parameter_names(layer), {}
    for param, meta in layer.named_parameters():
        tensor = tensors.dense(param, tuple(meta.shape))
        target = torch.float32 if param in fp32 else dtype
        state[param] = torch.nn.Parameter(tensor.to(device=device, dtype=target, copy=True), requires_grad=False)
    layer.load_state_dict(state, strict=True, assign=True)


def load_draft_experts(tensors: DraftTensors, args: ModelArgs, layout: DenseLayout,
                       device: torch.device) -> torch.Tensor:
    """The draft layer's experts packed [E, numel] on the device."""
    blocks = torch.empty(args.num_experts, layout.numel, dtype=layout.dtype, device=device)
    for e, (gate, up, down) in enumerate(tensors.experts()):
        layout.pack(blocks[e], gate, up, down)
    return blocks


def load_draft_model(tensors: DraftTensors, args: ModelArgs, names: DraftLayerNames, model: MoeTransformer,
                     cache: KVCache, activation, dtype: torch.dtype, device: torch.device,
                     decode_kernel: str = "sdpa") -> DraftModel:
    """The draft layer `tensors` holds, its KV pool appended to `cache`. ModelFormatError when they do not hold it."""
    if not tensors.has_layer():
        raise ModelFormatError(tensors.missing())
    with torch.device("meta"):
        layer = DraftLayer(args, names, has_head=tensors.has_head())
    gc.collect()  # see engine.model.model_tree.meta_model
    load_draft_dense(layer, tensors, dtype, device)
    layer.eval()
    attention = getattr(layer.layer, "self_attn", None)
    if attention is not None:
        attention.decode_kernel = decode_kernel
    layout = DenseLayout(args.hidden_size, args.moe_intermediate_size, dtype, activation)
    experts = DraftExperts(layout, load_draft_experts(tensors, args, layout, device))
    add_draft_pool(cache)
    return DraftModel(layer, experts, model, cache)
