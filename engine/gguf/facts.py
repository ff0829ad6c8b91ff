"""What the picker and `wisp doctor` say about a GGUF file, from its header alone: architecture, quant types,
the stored bytes of one expert per MoE layer, and which engine `--backend auto` would run it on."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from engine.gguf.model_file import GgufModel
from engine.gguf.reader import GgufFile
from engine.units import format_bytes

# llama.cpp's stacked expert tensors (LLM_FFN_EXPS_REGEX), and the per-expert tensors of older files
EXPERT_TENSOR = re.compile(r"^blk\.(\d+)\.ffn_(?:gate|up|down|gate_up)_(?:ch|)exps\."
                           r"|^blk\.(\d+)\.ffn_(?:gate|up|down)\.\d+\.")


@dataclass(frozen=True)
class GgufFacts:
    """`tensor_types` and `expert_types` count tensors per quant type name; `bytes_per_expert` maps each MoE layer
    to one expert's stored bytes (gate + up + down, as a slot holds them); `backend` is what auto picks."""

    path: Path
    architecture: str
    file_type: str
    num_experts: int
    top_k: int
    tensor_types: dict[str, int]
    expert_types: dict[str, int]
    bytes_per_expert: dict[int, int] = field(default_factory=dict)
    dense_bytes: int = 0  # every other tensor, as stored
    supported: bool = False
    reason: str = ""
    backend: str = "llama.cpp"

    @property
    def max_bytes_per_expert(self) -> int:
        """The slot size: experts of every layer must fit one slot."""
        return max(self.bytes_per_expert.values(), default=0)

    @property
    def expert_bytes_total(self) -> int:
        return sum(self.bytes_per_expert.values()) * self.num_experts

    def summary_lines(self) -> list[str]:
        """Human lines for `wisp doctor` / the picker's details."""
        types = ", ".join(f"{kind} x{count}" for kind, count in sorted(self.tensor_types.items()))
        experts = ", ".join(sorted(self.expert_types)) or "none"
        return [
            f"{self.path.name}: {self.architecture}, {self.file_type}, {self.num_experts} experts (top {self.top_k})",
            f"tensor types: {types}; experts stored as {experts}",
            f"one expert: {format_bytes(self.max_bytes_per_expert)} stored; all experts "
            f"{format_bytes(self.expert_bytes_total)}, other weights {format_bytes(self.dense_bytes)}",
            f"engine (--backend auto): {self.backend}: {self.reason}",
        ]


def gguf_facts(path: Path | str) -> GgufFacts:
    """Facts about any GGUF file (also ones Wisp's engine does not run); raises ModelFormatError when the file
    is not a readable GGUF."""
    model = GgufModel(path)
    file = model.file
    arch = str(file.get("general.architecture") or "unknown")
    types = model.tensor_types()
    experts, dense_bytes = _expert_bytes(file)
    num_experts = int(file.get(f"{arch}.expert_count") or 0)
    supported, reason = model.support()
    return GgufFacts(
        path=model.path, architecture=arch, file_type=_file_type(file.get("general.file_type")),
        num_experts=num_experts, top_k=int(file.get(f"{arch}.expert_used_count") or 0),
        tensor_types=dict(Counter(types.values())),
        expert_types=dict(Counter(kind for name, kind in types.items() if EXPERT_TENSOR.match(name))),
        bytes_per_expert={layer: total // num_experts for layer, total in experts.items()} if num_experts else {},
        dense_bytes=dense_bytes, supported=supported, reason=reason,
        backend="wisp" if supported else "llama.cpp",
    )


def _expert_bytes(file: GgufFile) -> tuple[dict[int, int], int]:
    """Stored bytes of the expert tensors per layer, and of everything else."""
    experts: Counter = Counter()
    dense = 0
    for name, info in file.tensors.items():
        match = EXPERT_TENSOR.match(name)
        if match:
            experts[int(match.group(1) or match.group(2))] += info.num_bytes
        else:
            dense += info.num_bytes
    return dict(sorted(experts.items())), dense


def _file_type(value) -> str:
    """general.file_type as llama.cpp's quantize names it: 7 -> "q8_0", 15 -> "q4_k_m"."""
    from gguf import LlamaFileType

    try:
        return LlamaFileType(value).name.lower().removeprefix("mostly_").removeprefix("all_")
    except ValueError:
        return "unknown type" if value is None else f"file type {value}"
