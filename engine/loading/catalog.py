"""Find models a user already has (bundled demo, Hugging Face cache, added folders, GGUF files) and describe
each without loading it: architecture, experts, size on disk, or the reason it cannot be used."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from engine.alloc.memory_plan import MemoryPlan
from engine.errors import WispError
from engine.loading.mmproj_pairing import is_mmproj_name, mmproj_beside, paired_mmproj
from engine.loading.plan import BudgetMarks, LoadPlan, plan_for
from engine.loading.source import open_source
from engine.model.args import ModelArgs
from engine.model.config_file import read_args
from engine.loading.model_path import DEMO_MODEL, cached_snapshot, hf_hub_cache


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
    sees_images: bool = False  # a vision tower: the checkpoint's own, or a GGUF file's paired mmproj
    mmproj: str | None = None  # a GGUF file's paired vision tower (engine.loading.mmproj_pairing)

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
                      args.num_experts_per_tok, weights_size(path), num_shared_experts=num_shared_experts(args),
                      sees_images="vision_params" in args.extra)


def num_shared_experts(args: ModelArgs) -> int:
    """Qwen2-MoE's one gated shared expert or DeepSeek's n_shared_experts."""
    return args.shared_experts.n_shared_experts or (1 if args.shared_experts.shared_expert_intermediate_size else 0)


def describe_gguf(path: Path, name: str) -> ModelEntry:
    """A GGUF file runs on llama.cpp; its metadata (read with the gguf package) says what it is."""
    from engine.gguf.info import read_info

    size = path.stat().st_size if path.is_file() else 0
    if is_mmproj_name(path):
        return ModelEntry(str(path), name, "gguf", size_bytes=size,
                          error=f"{path.name} is a vision tower (mmproj), not a model: add the model file beside it, "
                                "which takes it")
    try:
        info = read_info(path)
    except WispError as err:
        return ModelEntry(str(path), name, "gguf", size_bytes=size, error=str(err))
    mmproj = gguf_mmproj(path)
    return ModelEntry(str(path), name, "gguf", info.architecture, info.num_layers, info.num_experts, info.top_k, size,
                      num_shared_experts=info.num_shared_experts, sees_images=mmproj is not None,
                      mmproj=str(mmproj) if mmproj else None)


def gguf_mmproj(path: Path) -> Path | None:
    """The vision tower Wisp's engine pairs with a GGUF file (an mmproj*.gguf beside one it runs that takes images)."""
    from engine.gguf.model_file import GgufModel

    if mmproj_beside(path) is None:
        return None
    try:
        return paired_mmproj(path, GgufModel(path).args, None)
    except WispError:  # an architecture llama.cpp runs: its own mmproj handling, not Wisp's
        return None


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
    found = [describe(p) for p in sorted(folder.iterdir())
             if (p / "config.json").exists() or (p.suffix == ".gguf" and not is_mmproj_name(p))]
    return found or [ModelEntry(str(folder), folder.name, "folder", error=f"{folder}: no model (config.json) found")]


def scan_models(extra_paths: list[str] | tuple[str, ...] = (), cache: Path | None = None) -> list[ModelEntry]:
    """The bundled demo first, then the Hugging Face cache, then user-added folders and files."""
    entries = [describe(DEMO_MODEL, "Wisp demo (qwen3_moe)", "demo")]
    entries += hf_cache_entries(cache)
    for extra in extra_paths:
        entries += folder_entries(Path(extra).expanduser())
    return entries


def fit_summary(options) -> str:
    """"fits" (everything resident), "pages experts" (WiSP), or "too small: ..." for `options.model` at
    `options.budget_bytes`, as engine_plan plans it; a GGUF file that llama.cpp runs: how llama.cpp places it."""
    from dataclasses import replace

    path = Path(str(options.model))
    if path.suffix == ".gguf" and not wisp_runs_gguf(path, options.backend):
        return llama_cpp_fit(path, options.budget_bytes)
    return plan_summary(lambda mode: engine_plan(replace(options, experts=mode)))


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


def wisp_runs_gguf(path: Path, backend: str) -> bool:
    from engine.gguf.backend_choice import WISP, choose_backend

    return choose_backend(path, backend).backend == WISP


def llama_cpp_fit(path: Path, budget_bytes: int) -> str:
    """llama.cpp places the model itself: compare the file with the budget."""
    from engine.gguf.backend_choice import llama_cpp_installed

    if not llama_cpp_installed():
        return "runs on llama.cpp, which is not installed: choose it for the pip command"
    if path.stat().st_size <= budget_bytes:
        return "fits (llama.cpp)"
    return "larger than the budget: llama.cpp with experts on the CPU (--n-cpu-moe)"


def model_plan(options) -> LoadPlan:
    """engine.loading.plan_for of `options.model` (a folder, None for the demo, or a GGUF file Wisp's engine runs)."""
    return plan_for(open_source(options.model), options)


def engine_plan(options) -> MemoryPlan:
    """The memory plan the engine would load `options.model` with; raises BudgetError (naming the minimum) when
    the budget is too small, UnsupportedModelError for a GGUF file that goes to llama.cpp (no Wisp plan)."""
    return model_plan(options).memory


def budget_marks(options) -> BudgetMarks:
    """The minimum and all-resident budgets of `options.model` under `options` (its budget is ignored)."""
    return model_plan(options).marks
