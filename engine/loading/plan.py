"""plan_for(source, options) -> LoadPlan: what the engine would put on the device for a model source under these
options, from headers alone. The loader builds from this plan, and the picker's estimate, `wisp configure` and
the budget marks read the same one, so what they show is what a load gets. Torch loads when a plan is made."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from engine.alloc.memory_plan import (MemoryPlan, ModelSizes, PlanRequest, kv_floor_bytes, minimum_budget,
                                      plan_memory, state_bytes, workspace_bytes)
from engine.config import EngineOptions
from engine.errors import RequestError, UnsupportedModelError
from engine.loading.mmproj_pairing import model_projector, paired_mmproj, refuse_mmproj_for_folder
from engine.loading.source import ModelSource, SourceKind
from engine.model.args import ModelArgs
from engine.model.mtp_sizes import with_draft_layer
from engine.model.sizes import model_sizes

if TYPE_CHECKING:
    import torch

    from engine.gguf.model_file import GgufModel


@dataclass(frozen=True)
class BudgetMarks:
    """What a model needs, sized as the engine sizes it at load: `minimum` holds the dense weights, top_k expert
    slots per layer, the KV floor and the workspace (experts paged); `all_resident` holds every expert too."""

    minimum: int
    all_resident: int


@dataclass(frozen=True)
class LoadPlan:
    """A source planned under options: the device and compute dtype a load would pick, the model's sizes at that
    dtype (a GGUF file's experts at their stored bytes, and its dense tensors too where keeps_file_types) and the
    planner's request. `gguf` is the opened file."""

    source: ModelSource
    args: ModelArgs
    device: torch.device
    dtype: torch.dtype
    sizes: ModelSizes
    request: PlanRequest
    gguf: GgufModel | None = field(default=None, compare=False, repr=False)
    keeps_file_types: bool = False  # a GGUF file's quantized dense tensors stay in their blocks (engine.quant.dense)
    dense_quant: str | None = None  # a checkpoint's dense weights quantized at load (engine.quant.dense_quant)
    mmproj: Path | None = None  # a GGUF model's vision tower (engine.loading.mmproj_pairing), counted in sizes

    @property
    def memory(self) -> MemoryPlan:
        """The split of the budget; raises BudgetError naming the minimum when the budget is too small."""
        return plan_memory(self.sizes, self.request)

    @property
    def marks(self) -> BudgetMarks:
        """The minimum and all-resident budgets (the options' budget does not change them)."""
        sizes, request = self.sizes, self.request
        fixed = (sizes.dense_bytes + workspace_bytes(sizes, request.max_batched_tokens, request.max_num_seqs)
                 + state_bytes(sizes, request))
        experts = sizes.num_moe_layers * sizes.num_experts * sizes.expert_bytes
        kv_floor = kv_floor_bytes(sizes, request.max_num_seqs, request.max_model_len)
        return BudgetMarks(minimum_budget(sizes, request), fixed + experts + kv_floor)


def plan_for(source: ModelSource, options: EngineOptions) -> LoadPlan:
    """The plan Wisp's engine would load `source` with. UnsupportedModelError for a source it does not plan: a
    remote server, or a GGUF file that options.backend sends to llama.cpp (which places it itself)."""
    from engine.system.hardware import pick_device
    from engine.model.loader import resolve_dtype

    if source.kind is SourceKind.REMOTE:
        raise UnsupportedModelError(f"{source.location}: a remote server manages its own memory")
    check_dense_quant(source, options)
    device = pick_device(options.device)
    model_file = wisp_gguf(source, options.backend) if source.kind is SourceKind.GGUF else None
    args = model_file.args if model_file is not None else source.args
    dtype = resolve_dtype(options.dtype, args, device)
    keep = model_file is not None and options.keeps_file_types(device.type)
    sizes = planned_sizes(args, model_file, dtype.itemsize, keep, options.dense_quant)
    mmproj = planned_mmproj(source, args, options.mmproj)
    if mmproj is not None:
        sizes = replace(sizes, dense_bytes=sizes.dense_bytes + tower_bytes(mmproj, args, dtype.itemsize))
    if options.speculative in ("mtp", "auto"):  # the draft layer is loaded only for these modes (engine.model.mtp)
        from engine.loading.draft_source import find_draft_layer

        names, _, has_head = find_draft_layer(source, model_file, args)
        if names is not None:
            sizes = with_draft_layer(sizes, args, has_head)
    return LoadPlan(source, args, device, dtype, sizes, options.plan_request(args.max_position_embeddings),
                    model_file, keep, options.dense_quant, mmproj)


def planned_mmproj(source: ModelSource, args: ModelArgs, mmproj: str | None) -> Path | None:
    """A GGUF model's vision tower: --mmproj's, else the one beside it; a folder takes none (its own files)."""
    if source.kind is not SourceKind.GGUF:
        refuse_mmproj_for_folder(source.path, mmproj)
        return None
    return paired_mmproj(source.path, args, mmproj)


def tower_bytes(path: Path, args: ModelArgs, dtype_bytes: int) -> int:
    """The tower's weights and one largest image's activations (as a checkpoint's: engine.vision.vision_args,
    gemma4_args), from the mmproj file's header; ModelFormatError naming it when it does not fit the model (another
    model's projector, another hidden size)."""
    from engine.gguf.mmproj_file import MmprojFile
    from engine.gguf.mmproj_sizes import mmproj_tower_elements

    mmproj = MmprojFile(path)
    model_name = Path(args.extra.get("gguf_path", "the model")).name
    mmproj.check_projector(model_projector(args), model_name)
    mmproj.check_feeds(args.hidden_size, model_name)
    return mmproj_tower_elements(mmproj) * dtype_bytes


def check_dense_quant(source: ModelSource, options: EngineOptions) -> None:
    """RequestError when options.dense_quant asks to quantize a model that is not a safetensors checkpoint: a GGUF
    file's dense tensors already keep the types it was quantized to, and a remote server holds its own weights."""
    if options.dense_quant is None or source.kind not in (SourceKind.GGUF, SourceKind.REMOTE):
        return
    if source.kind is SourceKind.GGUF:
        what = ("is a GGUF file, whose dense tensors already keep their stored types (--dense-weights chooses blocks "
                "or the compute dtype)")
    else:
        what = "is a remote server, which holds its own weights"
    raise RequestError(f"--dense-quant quantizes a safetensors checkpoint's dense weights at load; "
                       f"{source.location} {what}")


def wisp_gguf(source: ModelSource, backend: str) -> GgufModel:
    """The GGUF file opened for Wisp's engine, or UnsupportedModelError when the backend choice is llama.cpp."""
    from engine.gguf.backend_choice import LLAMA_CPP, choose_backend
    from engine.gguf.model_file import GgufModel

    choice = choose_backend(source.path, backend)
    if choice.backend == LLAMA_CPP:
        raise UnsupportedModelError(f"{source.path.name} runs on llama.cpp, which places it itself ({choice.reason})")
    return GgufModel(source.path)


def planned_sizes(args: ModelArgs, model_file: GgufModel | None, dtype_bytes: int,
                  keep_types: bool = False, dense_quant: str | None = None) -> ModelSizes:
    """A config's sizes at the compute dtype, dense_quant: its dense weights at the blocks that quantizes them to
    (engine.quant.dense_quant); a GGUF file's experts at their slot bytes and, keep_types, its quantized dense
    tensors at their stored bytes (engine.gguf.sizes)."""
    if model_file is None and dense_quant:
        from engine.model.loader import quantized_dense_sizes

        return quantized_dense_sizes(args, dtype_bytes, dense_quant)
    if model_file is None:
        return model_sizes(args, dtype_bytes)
    from engine.gguf.sizes import gguf_model_sizes

    return gguf_model_sizes(model_file, dtype_bytes, keep_types)
