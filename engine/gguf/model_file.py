"""A GGUF MoE model file opened for Wisp's engine: ModelArgs, dense tensors under Wisp's parameter names,
stacked expert tensors per MoE layer, and whether the engine supports every tensor's quant type."""

from __future__ import annotations

from collections import Counter
from functools import cached_property
from pathlib import Path

import numpy as np

from engine.errors import ModelFormatError, UnsupportedModelError, WispError
from engine.gguf.model_args import architecture_of, family_of, model_args
from engine.gguf.param_names import gguf_name, layer_param
from engine.gguf.reader import GgufFile
from engine.gguf.split_experts import has_split_experts, split_expert_view, split_name
from engine.gguf.tensor_map import expert_bias_names, unpermute_rotary
from engine.model.families.tensor_spec import EXPERTS, GATE_UP
from engine.gguf.tensors import (SUPPORTED_QTYPES, DenseTensor, ExpertLayer, ExpertTensor, dequantize, qtype_name,
                                 row_bytes)
from engine.model.args import ModelArgs
from engine.model.families import GgufFormat
from engine.text.tokenizer import Tokenizer


UNGATED = ("relu_squared",)  # expert activations without a gate: their files hold no ffn_gate_exps


class GgufModel:
    """Open with `GgufModel(path)`; nothing but the header is read until a tensor is asked for."""

    def __init__(self, path: Path | str):
        self.file = GgufFile(path)
        self.path = self.file.path

    @cached_property
    def architecture(self) -> str:
        return architecture_of(self.file)

    @cached_property
    def format(self) -> GgufFormat:
        """The family's GGUF format; UnsupportedModelError naming an architecture Wisp's engine does not run."""
        return family_of(self.file).gguf

    @cached_property
    def args(self) -> ModelArgs:
        """Raises UnsupportedModelError / ModelFormatError naming the architecture or key at fault."""
        return model_args(self.file)

    def tokenizer(self) -> Tokenizer:
        """engine.text.tokenizer.Tokenizer from the file's metadata (see engine.gguf.tokenizer)."""
        from engine.gguf.tokenizer import gguf_tokenizer

        return gguf_tokenizer(self.file)

    def tensor_types(self) -> dict[str, str]:
        """GGUF tensor name -> quant type name (F32, Q4_K, ...), for every tensor in the file."""
        return {name: qtype_name(info.qtype) for name, info in self.file.tensors.items()}

    def check(self) -> None:
        """Raises UnsupportedModelError (or ModelFormatError) naming what Wisp's engine cannot run: the
        architecture, a feature in the metadata, the tokenizer, a quant type, or a tensor it would ignore."""
        from engine.gguf.tokenizer import check_tokenizer

        args = self.args
        check_tokenizer(self.file)
        joined = self._joined_parts(args)  # dequantized when loaded (gguf's reference reads every type)
        unsupported = Counter(kind for name, kind in self.tensor_types().items()
                              if kind not in SUPPORTED_QTYPES and name not in joined)
        if unsupported:
            kinds = ", ".join(f"{kind} ({count} tensors)" for kind, count in sorted(unsupported.items()))
            raise UnsupportedModelError(f"{self.path.name} has tensors of type {kinds}; Wisp's engine runs "
                                        f"{', '.join(SUPPORTED_QTYPES)}")
        unused = sorted(set(self.file.tensors) - self._expected_tensors(args))
        if unused:
            raise UnsupportedModelError(f"{self.path.name} has tensors Wisp's engine would ignore "
                                        f"({', '.join(unused[:3])}{', ...' if len(unused) > 3 else ''})")

    def support(self) -> tuple[bool, str]:
        """(True, summary) when Wisp's engine runs this file, else (False, the reason for a person)."""
        try:
            self.check()
        except WispError as error:
            return False, str(error)
        kinds = ", ".join(sorted(set(self.tensor_types().values())))
        return True, f"{self.architecture} ({self.args.model_type}), {kinds}: Wisp's engine runs it"

    def _expected_tensors(self, args: ModelArgs) -> set[str]:
        from engine.model.model_tree import meta_model

        names = {gguf_name(param, self.architecture) for param, _ in meta_model(args).named_parameters()}
        names |= self._joined_parts(args)  # a joined tensor's parts (MLA's kv_b)
        if self.format.file_tensors is not None:  # computed from the model's numbers, never read
            names |= {spec.name for spec in self.format.file_tensors(args)}
        for layer, is_moe in enumerate(args.moe_layers):
            if is_moe:
                names.add(f"blk.{layer}.{GATE_UP}.weight")
            for projection in EXPERTS if is_moe else ():
                names.add(f"blk.{layer}.{EXPERTS[projection]}.weight")
                names |= {split_name(layer, projection, e) for e in range(args.num_experts)}
            if is_moe and args.experts.bias:
                names |= set(expert_bias_names(layer).values())
        if self.format.trailing_layers:  # the multi-token-prediction layers past num_hidden_layers
            names |= {name for name in self.file.tensors if _layer_of(name) >= args.num_hidden_layers}
        return names

    def dense_tensors(self) -> dict[str, DenseTensor]:
        """Every non-expert parameter of Wisp's model (lm_head absent when tied), raw, under Wisp's names.
        Raises ModelFormatError naming a missing tensor or a shape that disagrees with the metadata."""
        from engine.model.model_tree import meta_model

        args, tensors = self.args, {}
        for param, value in meta_model(args).named_parameters():
            name = gguf_name(param, self.architecture)
            if name == "output.weight" and args.tie_word_embeddings:
                continue
            tensors[param] = self._dense(param, name, tuple(value.shape))
        return tensors

    def dense_tensor(self, name: str) -> DenseTensor:
        """Any tensor of the file by its GGUF name, raw, in its own (torch-order) shape: the expert biases."""
        info = self._info(name)
        self._check_rows(info)
        return DenseTensor(name, info.qtype, tuple(info.shape), self.file.raw(name).reshape(info.shape[0], -1))

    def expert_layers(self) -> dict[int, ExpertLayer]:
        """MoE layer index -> its stacked gate, up and down tensors (raw views, never dequantized)."""
        args = self.args
        return {layer: self.layer_experts(layer) for layer, is_moe in enumerate(args.moe_layers) if is_moe}

    def layer_experts(self, layer: int) -> ExpertLayer:
        """One layer's stacked gate, up and down tensors (a trailing draft layer's too: engine.gguf.draft_layer)."""
        args = self.args
        E, D, I = args.num_experts, args.expert_hidden_size, args.moe_intermediate_size
        shapes = {"gate": (E, I, D), "up": (E, I, D), "down": (E, D, I)}
        return ExpertLayer(layer, **{proj: self._experts(layer, proj, shape) for proj, shape in shapes.items()})

    def named_dense(self, param: str, name: str, shape: tuple[int, ...]) -> DenseTensor:
        """The tensor `name` as Wisp's parameter `param` of `shape`; ModelFormatError where it is missing or its
        shape disagrees."""
        return self._dense(param, name, shape)

    def _info(self, name: str):
        if name not in self.file.tensors:
            raise ModelFormatError(f"{self.path}: tensor '{name}' is missing")
        return self.file.tensors[name]

    def _joined_parts(self, args: ModelArgs) -> set[str]:
        from engine.model.model_tree import meta_model

        if not self.format.joined:
            return set()
        return {part for param, _ in meta_model(args).named_parameters() for part in self._parts(param)}

    def _parts(self, param: str) -> list[str]:
        """The GGUF tensors the family's files store Wisp parameter `param` as (GgufFormat.joined), or []."""
        layer, within = layer_param(param)
        joined = self.format.joined.get(within)
        return [f"blk.{layer}.{part}" for part in joined.parts] if joined else []

    def _joined(self, param: str, shape: tuple[int, ...]) -> DenseTensor:
        """A parameter the file stores as other tensors (GgufFormat.joined), computed back: f32 whatever their
        types."""
        from gguf import GGMLQuantizationType

        joined = self.format.joined[layer_param(param)[1]]
        parts = []
        for part in self._parts(param):
            info = self._info(part)
            self._check_rows(info)
            parts.append(dequantize(self.file.raw(part), info.qtype, info.shape).numpy())
        weight = np.ascontiguousarray(joined.join(self.args, parts), dtype=np.float32)
        if weight.shape != shape:
            raise ModelFormatError(f"{self.path}: the tensors {', '.join(self._parts(param))} join into shape "
                                   f"{list(weight.shape)}, the metadata implies {list(shape)} for {param}")
        name = self._parts(param)[0]
        return DenseTensor(name, int(GGMLQuantizationType.F32), shape, weight.view(np.uint8).reshape(shape[0], -1))

    def _dense(self, param: str, name: str, shape: tuple[int, ...]) -> DenseTensor:
        parts = self._parts(param)
        if parts and all(part in self.file.tensors for part in parts):
            return self._joined(param, shape)
        info = self._info(name)
        # llama.cpp drops size-1 dimensions: the [1, D] shared-expert gate is [D], a depthwise conv [C, 1, K] is [C, K]
        if info.shape != shape and _squeezed(info.shape) != _squeezed(shape):
            raise ModelFormatError(f"{self.path}: tensor '{name}' has shape {list(info.shape)}, the metadata "
                                   f"implies {list(shape)} for {param}")
        self._check_rows(info)
        rows = self.file.raw(name).reshape(shape[0], -1)  # [rows, bytes per row]; a 1-D tensor's rows are elements
        if self.format.rotary_permuted and name.rsplit(".", 2)[-2] in ("attn_q", "attn_k"):
            heads = self.args.num_attention_heads if ".attn_q." in name else self.args.num_key_value_heads
            rows = unpermute_rotary(rows, heads)
        return DenseTensor(name, info.qtype, shape, rows)

    def _experts(self, layer: int, projection: str, shape: tuple[int, int, int]) -> ExpertTensor:
        name = f"blk.{layer}.{EXPERTS[projection]}.weight"
        fused = f"blk.{layer}.{GATE_UP}.weight"
        if name not in self.file.tensors and projection != "down" and fused in self.file.tensors:
            return self._fused_half(fused, projection, shape)
        if projection == "gate" and self.args.experts.activation in UNGATED and name not in self.file.tensors:
            return self._experts(layer, "up", shape)  # an ungated expert's up rows stand for both halves
        if name not in self.file.tensors and has_split_experts(self.file, layer):
            qtype, raw = split_expert_view(self.file, layer, projection, shape[0])
            expert = self.file.tensors[split_name(layer, projection, 0)]
            if expert.shape != shape[1:]:
                raise ModelFormatError(f"{self.path}: tensor '{expert.name}' has shape {list(expert.shape)}, the "
                                       f"metadata implies {list(shape[1:])}")
            self._check_rows(expert)
            return ExpertTensor(split_name(layer, projection, 0).replace(".0.", ".*."), qtype, shape, raw)
        info = self._info(name)
        if info.shape != shape:
            raise ModelFormatError(f"{self.path}: tensor '{name}' has shape {list(info.shape)}, the metadata "
                                   f"implies {list(shape)}")
        self._check_rows(info)
        return ExpertTensor(name, info.qtype, shape, self.file.raw(name).reshape(shape[0], -1))

    def _fused_half(self, name: str, projection: str, shape: tuple[int, int, int]) -> ExpertTensor:
        """gate or up of a stacked [E, 2I, D] ffn_gate_up_exps (gate rows first): each expert's half is one
        contiguous run of rows, the experts a constant stride apart."""
        info = self._info(name)
        E, I, D = shape
        if info.shape != (E, 2 * I, D):
            raise ModelFormatError(f"{self.path}: tensor '{name}' has shape {list(info.shape)}, the metadata "
                                   f"implies {[E, 2 * I, D]}")
        self._check_rows(info)
        half = I * row_bytes(info.qtype, D)
        rows = self.file.raw(name).reshape(E, 2 * half)
        view = rows[:, :half] if projection == "gate" else rows[:, half:]
        return ExpertTensor(f"{name}[{projection}]", info.qtype, shape, view)

    def _check_rows(self, info) -> None:
        if row_bytes(info.qtype, info.shape[-1]) * int(np.prod(info.shape[:-1], dtype=np.int64)) != info.num_bytes:
            raise ModelFormatError(f"{self.path}: tensor '{info.name}' rows of {info.shape[-1]} are not whole "
                                   f"{qtype_name(info.qtype)} blocks")


def _squeezed(shape) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)


def _layer_of(name: str) -> int:
    """N of a blk.N.* tensor; -1 for the others."""
    parts = name.split(".")
    return int(parts[1]) if parts[0] == "blk" and parts[1].isdigit() else -1


def check_supported(path: Path | str) -> tuple[bool, str]:
    """Whether Wisp's engine runs the GGUF file at `path`: (supported, reason). Reads only the header;
    an unreadable file is (False, the error's message)."""
    try:
        model = GgufModel(path)
    except WispError as error:
        return False, str(error)
    return model.support()
