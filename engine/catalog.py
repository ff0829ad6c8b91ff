"""Find models a user already has (bundled demo, Hugging Face cache, added folders, GGUF files) and describe
each without loading it: architecture, experts, size on disk, or the reason it cannot be used."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.alloc.memory_plan import MemoryPlan, ModelSizes, PlanRequest, plan_memory
from engine.errors import UnsupportedModelError, WispError
from engine.model.args import ModelArgs
from engine.model.config_file import read_args
from engine.model.sizes import model_sizes
from engine.model_path import DEMO_MODEL, cached_snapshot, hf_hub_cache


@dataclass(frozen=True)
class ModelEntry:
    """One model the picker can show; `error` says why it cannot be loaded (then the numbers are 0)."""

    path: str
    name: str
    source: str  # "demo" | "hf-cache" | "folder" | "gguf"
    model_type: str = ""
    num_layers: int = 0
    num_experts: int = 0
    top_k: int = 0
    size_bytes: int = 0
    error: str | None = None
    num_shared_experts: int = 0  # always resident, planned as dense weights

    @property
    def is_usable(self) -> bool:
        return self.error is None


def weights_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.glob("*.safetensors"))


def safetensors_problem(folder: Path) -> str | None:
    """Why the folder's weights cannot be read, from each file's header and size alone (cheap: no tensor is
    read): a missing file, an unreadable header, or a file shorter than its header says (truncated)."""
    import json
    import struct

    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return f"{folder}: no .safetensors weights"
    for file in files:
        size = file.stat().st_size
        try:
            with open(file, "rb") as handle:
                (header_len,) = struct.unpack("<Q", handle.read(8))
                header = json.loads(handle.read(header_len)) if 8 + header_len <= size else None
        except (OSError, ValueError, struct.error) as err:
            return f"{file.name}: unreadable safetensors header ({err})"
        if header is None:
            return f"{file.name}: truncated (its header runs past the end of the file)"
        end = max((t["data_offsets"][1] for k, t in header.items() if k != "__metadata__"), default=0)
        if size < 8 + header_len + end:
            return f"{file.name}: truncated ({size} bytes on disk, its header describes {8 + header_len + end})"
    return None


def describe(path: Path, name: str | None = None, source: str = "folder") -> ModelEntry:
    name = name or path.name
    if path.suffix == ".gguf":
        return describe_gguf(path, name)
    try:
        args = read_args(path)
    except WispError as err:
        return ModelEntry(str(path), name, source, error=str(err))
    if not (path / "tokenizer.json").exists():
        return ModelEntry(str(path), name, source, args.model_type, error=f"{path / 'tokenizer.json'}: missing")
    problem = safetensors_problem(path)
    if problem is not None:
        return ModelEntry(str(path), name, source, args.model_type, args.num_hidden_layers, args.num_experts,
                          args.num_experts_per_tok, weights_size(path), error=problem)
    return ModelEntry(str(path), name, source, args.model_type, args.num_hidden_layers, args.num_experts,
                      args.num_experts_per_tok, weights_size(path), num_shared_experts=num_shared_experts(args))


def num_shared_experts(args: ModelArgs) -> int:
    """Qwen2-MoE's one gated shared expert or DeepSeek's n_shared_experts."""
    return args.n_shared_experts or (1 if args.shared_expert_intermediate_size else 0)


def describe_gguf(path: Path, name: str) -> ModelEntry:
    """A GGUF file runs on llama.cpp; its metadata (read with the gguf package) says what it is."""
    from engine.backends.gguf_info import read_info

    size = path.stat().st_size if path.is_file() else 0
    try:
        info = read_info(path)
    except WispError as err:
        return ModelEntry(str(path), name, "gguf", size_bytes=size, error=str(err))
    return ModelEntry(str(path), name, "gguf", info.architecture, info.num_layers, info.num_experts, info.top_k, size,
                      num_shared_experts=info.num_shared_experts)


def hf_cache_entries(cache: Path | None = None) -> list[ModelEntry]:
    cache = cache or hf_hub_cache()
    entries = []
    for repo in sorted(cache.glob("models--*")) if cache.is_dir() else []:
        repo_id = repo.name[len("models--"):].replace("--", "/")
        snapshot = cached_snapshot(repo_id, cache)
        if snapshot is not None and (snapshot / "config.json").exists():
            entries.append(describe(snapshot, repo_id, "hf-cache"))
    return entries


def folder_entries(folder: Path) -> list[ModelEntry]:
    """A model folder itself, or a folder holding model folders and .gguf files."""
    if (folder / "config.json").exists() or folder.suffix == ".gguf":
        return [describe(folder)]
    if not folder.is_dir():
        return [ModelEntry(str(folder), folder.name, "folder", error=f"{folder}: no such folder")]
    found = [describe(p) for p in sorted(folder.iterdir()) if (p / "config.json").exists() or p.suffix == ".gguf"]
    return found or [ModelEntry(str(folder), folder.name, "folder", error=f"{folder}: no model (config.json) found")]


def scan_models(extra_paths: list[str] | tuple[str, ...] = (), cache: Path | None = None) -> list[ModelEntry]:
    """The bundled demo first, then the Hugging Face cache, then user-added folders and files."""
    entries = [describe(DEMO_MODEL, "Wisp demo (qwen3_moe)", "demo")]
    entries += hf_cache_entries(cache)
    for extra in extra_paths:
        entries += folder_entries(Path(extra).expanduser())
    return entries


def estimate_plan(path: str, budget_bytes: int | None, mode: str = "paged", max_model_len: int = 4096,
                  max_num_seqs: int = 1, dtype_bytes: int = 2) -> MemoryPlan:
    """The memory plan a model would get at this budget, before loading; raises BudgetError if too small."""
    args: ModelArgs = read_args(Path(path))
    max_model_len = min(max_model_len, args.max_position_embeddings)
    request = PlanRequest(mode=mode, budget_bytes=budget_bytes, block_size=16, max_model_len=max_model_len,
                          max_num_seqs=max_num_seqs, max_batched_tokens=max_model_len)
    return plan_memory(model_sizes(args, dtype_bytes), request)


def fit_summary(path: str, budget_bytes: int) -> str:
    """"fits" (everything resident), "pages experts" (WiSP), or "too small: ..." at this budget."""
    if Path(path).suffix == ".gguf":
        return gguf_fit_summary(Path(path), budget_bytes)
    return plan_summary(lambda mode: estimate_plan(path, budget_bytes, mode=mode))


def plan_summary(plan_for_mode) -> str:
    """"fits", "pages experts (N slots per layer)" or "too small: ..." from plan_for_mode("resident"/"paged")."""
    try:
        plan_for_mode("resident")
        return "fits"
    except WispError:
        pass
    try:
        plan = plan_for_mode("paged")
        return f"pages experts ({plan.min_layer_slots} slots per layer)"
    except WispError as err:
        return f"too small: {err}"


def gguf_fit_summary(path: Path, budget_bytes: int) -> str:
    """On Wisp's engine (the file's architecture and quant types supported): its own plan at the budget, experts
    at their stored bytes. Otherwise llama.cpp places the model itself: compare the file with the budget."""
    from engine.config import EngineOptions
    from engine.gguf.backend_choice import llama_cpp_installed
    from engine.gguf.model_file import check_supported

    if check_supported(path)[0]:
        return plan_summary(lambda mode: engine_plan(EngineOptions(model=str(path), budget_bytes=budget_bytes,
                                                                   experts=mode, max_num_seqs=1)))
    if not llama_cpp_installed():
        return "runs on llama.cpp, which is not installed: choose it for the pip command"
    if path.stat().st_size <= budget_bytes:
        return "fits (llama.cpp)"
    return "larger than the budget: llama.cpp with experts on the CPU (--n-cpu-moe)"


@dataclass(frozen=True)
class BudgetMarks:
    """What a model needs, sized as the engine sizes it at load: `minimum` holds the dense weights, top_k expert
    slots per layer, the KV floor and the workspace (experts paged); `all_resident` holds every expert too."""

    minimum: int
    all_resident: int


def engine_sizes(options) -> tuple[ModelSizes, PlanRequest]:
    """The ModelSizes and PlanRequest the engine would load `options.model` with (a folder, None for the demo, or a
    GGUF file that Wisp's engine runs: experts at their slot bytes), from headers alone; the dtype follows the
    loaders' rule (engine.model.loader.resolve_dtype). A GGUF file that options.backend sends to llama.cpp has
    no Wisp plan: UnsupportedModelError says so."""
    from engine.hardware import pick_device
    from engine.model_path import resolve_model

    path = resolve_model(options.model)
    device = pick_device(options.device)
    if path.suffix == ".gguf":
        from engine.gguf.backend_choice import LLAMA_CPP, choose_backend
        from engine.gguf.model_file import GgufModel
        from engine.gguf.sizes import gguf_model_sizes

        choice = choose_backend(path, options.backend)
        if choice.backend == LLAMA_CPP:
            raise UnsupportedModelError(f"{path.name} runs on llama.cpp, which places it itself ({choice.reason})")
        model = GgufModel(path)
        args = model.args
        sizes = gguf_model_sizes(model, dtype_bytes(options, args, device))
    else:
        args = read_args(path)
        sizes = model_sizes(args, dtype_bytes(options, args, device))
    return sizes, options.plan_request(args.max_position_embeddings)


def dtype_bytes(options, args: ModelArgs, device) -> int:
    """Bytes per element of the dtype the engine would compute in for these options on `device`."""
    import torch

    from engine.model.loader import resolve_dtype

    return torch.empty((), dtype=resolve_dtype(options.dtype, args, device)).element_size()


def engine_plan(options) -> MemoryPlan:
    """The memory plan the engine would load `options.model` with; raises BudgetError (naming the minimum) when
    the budget is too small."""
    sizes, request = engine_sizes(options)
    return plan_memory(sizes, request)


def budget_marks(options) -> BudgetMarks:
    """The minimum and all-resident budgets of `options.model` under `options` (its budget is ignored)."""
    from engine.alloc.memory_plan import kv_floor_bytes, minimum_budget, state_bytes, workspace_bytes

    sizes, request = engine_sizes(options)
    fixed = (sizes.dense_bytes + workspace_bytes(sizes, request.max_batched_tokens, request.max_num_seqs)
             + state_bytes(sizes, request.max_num_seqs))
    experts = sizes.num_moe_layers * sizes.num_experts * sizes.expert_bytes
    kv_floor = kv_floor_bytes(sizes, request.max_num_seqs, request.max_model_len)
    return BudgetMarks(minimum_budget(sizes, request), fixed + experts + kv_floor)
