"""What a .gguf file holds, read from its header without loading weights: architecture, experts, layers,
context, chat template and the bytes of every tensor (for the picker and the memory plan)."""

from __future__ import annotations

import importlib.util
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from engine.errors import ModelFormatError, UnsupportedModelError

# llama.cpp's LLM_FFN_EXPS_REGEX, anchored to a layer: the tensors --n-cpu-moe keeps on the CPU
EXPERT_TENSOR = re.compile(r"^blk\.(\d+)\.ffn_(up|down|gate|gate_up)_(ch|)exps")
LAYER_TENSOR = re.compile(r"^blk\.(\d+)\.")
INSTALL_HINT = 'reading GGUF files needs the gguf package (a dependency of Wisp): pip install "gguf>=0.19"'


@dataclass(frozen=True)
class GgufInfo:
    path: Path
    architecture: str
    name: str
    num_layers: int
    num_experts: int
    top_k: int
    context_length: int
    file_type: str
    chat_templates: dict[str, str]
    kv_bytes_per_token: int  # f16 K and V of every layer (llama.cpp's default cache type)
    size_bytes: int
    layer_bytes: dict[int, int] = field(default_factory=dict)  # non-expert tensors of blk.N
    expert_layer_bytes: dict[int, int] = field(default_factory=dict)  # expert tensors of blk.N
    other_bytes: dict[str, int] = field(default_factory=dict)  # token_embd, output, output_norm, ...
    num_shared_experts: int = 0  # always-on experts beside the routed ones (qwen2moe, glm4moe)

    @property
    def num_moe_layers(self) -> int:
        return len(self.expert_layer_bytes)

    @property
    def expert_bytes(self) -> int:
        """One expert of one layer (the average over MoE layers, which agree unless quantized unevenly)."""
        if not self.expert_layer_bytes or not self.num_experts:
            return 0
        return sum(self.expert_layer_bytes.values()) // (self.num_moe_layers * self.num_experts)


def read_info(path: Path) -> GgufInfo:
    """Raises ModelFormatError for a file that is not a complete GGUF, UnsupportedModelError for an architecture
    this gguf/llama.cpp version does not know or when the gguf package is missing."""
    path = Path(path)
    header = read_gguf_header(path)
    fields = header.fields
    arch = fields.get("general.architecture")
    if not isinstance(arch, str):
        raise ModelFormatError(f"{path}: no general.architecture in the GGUF metadata")
    check_known(arch, path)
    layer_bytes, expert_bytes, other_bytes = tensor_bytes(header.tensors.values())
    return GgufInfo(
        path=path, architecture=arch, name=str(fields.get("general.name") or path.stem),
        num_layers=int(fields.get(f"{arch}.block_count") or 0),
        num_experts=int(fields.get(f"{arch}.expert_count") or 0),
        top_k=int(fields.get(f"{arch}.expert_used_count") or 0),
        context_length=int(fields.get(f"{arch}.context_length") or 0),
        file_type=file_type_name(fields.get("general.file_type")),
        chat_templates=chat_templates(fields),
        kv_bytes_per_token=kv_bytes_per_token(fields, arch),
        size_bytes=path.stat().st_size,
        layer_bytes=dict(layer_bytes), expert_layer_bytes=dict(expert_bytes), other_bytes=other_bytes,
        num_shared_experts=shared_experts(fields, arch, header.tensors),
    )


def shared_experts(fields: dict, arch: str, tensors) -> int:
    """{arch}.expert_shared_count, or 1 when the layers hold a shared expert (ffn_*_shexp) without saying."""
    if fields.get(f"{arch}.expert_shared_count") is not None:
        return int(fields[f"{arch}.expert_shared_count"])
    return int(any(name.endswith("ffn_down_shexp.weight") for name in tensors))


def read_gguf_header(path: Path):
    """engine.gguf.reader.GgufFile: `fields` (long arrays left undecoded) and `tensors` by name."""
    if importlib.util.find_spec("gguf") is None:  # tensor type sizes and architecture names come from it
        raise UnsupportedModelError(f"{path}: {INSTALL_HINT}")
    if not path.is_file():
        raise ModelFormatError(f"{path}: no such file")
    from engine.gguf.reader import GgufFile

    return GgufFile(path)


def check_known(arch: str, path: Path) -> None:
    from gguf import MODEL_ARCH_NAMES

    if arch not in set(MODEL_ARCH_NAMES.values()):
        raise UnsupportedModelError(f"{path}: architecture '{arch}' is not known to this gguf/llama.cpp version")


def tensor_bytes(tensors) -> tuple[dict[int, int], dict[int, int], dict[str, int]]:
    layers: dict[int, int] = defaultdict(int)
    experts: dict[int, int] = defaultdict(int)
    other: dict[str, int] = {}
    for tensor in tensors:
        expert = EXPERT_TENSOR.match(tensor.name)
        layer = LAYER_TENSOR.match(tensor.name)
        if expert:
            experts[int(expert.group(1))] += tensor.num_bytes
        elif layer:
            layers[int(layer.group(1))] += tensor.num_bytes
        else:
            other[tensor.name] = tensor.num_bytes
    return layers, experts, other


def file_type_name(value) -> str:
    """general.file_type as llama.cpp's quantize names it: 7 -> "q8_0", 15 -> "q4_k_m"."""
    from gguf import LlamaFileType

    try:
        return LlamaFileType(value).name.lower().removeprefix("mostly_").removeprefix("all_")
    except ValueError:
        return "unknown type" if value is None else f"file type {value}"


def chat_templates(fields: dict) -> dict[str, str]:
    """tokenizer.chat_template is the default; tokenizer.chat_template.NAME are named extras (tool_use, ...)."""
    prefix = "tokenizer.chat_template"
    templates = {"default": fields[prefix]} if isinstance(fields.get(prefix), str) else {}
    for key, value in fields.items():
        if key.startswith(prefix + ".") and isinstance(value, str):
            templates[key[len(prefix) + 1:]] = value
    return templates


def kv_bytes_per_token(fields: dict, arch: str) -> int:
    """Per-layer KV heads where the file lists them (0: a recurrent layer without a KV cache; sliding layers
    counted at the full layers' head size, a bound)."""
    layers = int(fields.get(f"{arch}.block_count") or 0)
    heads = first_int(fields.get(f"{arch}.attention.head_count")) or 1
    per_layer = fields.get(f"{arch}.attention.head_count_kv")
    if isinstance(per_layer, list):
        kv_heads = sum(int(v) for v in per_layer[:layers])
    else:
        kv_heads = layers * (first_int(per_layer) or heads)
    embedding = int(fields.get(f"{arch}.embedding_length") or 0)
    key = int(fields.get(f"{arch}.attention.key_length") or embedding // heads)
    value = int(fields.get(f"{arch}.attention.value_length") or embedding // heads)
    return kv_heads * (key + value) * 2


def first_int(value) -> int:
    """Head counts may be per-layer arrays; the largest bounds the KV cache."""
    if isinstance(value, list):
        return max((int(v) for v in value), default=0)
    return int(value or 0)
