"""The vision tower a GGUF model file gets: the mmproj file named with --mmproj, or else the one beside it
(`mmproj*.gguf` in the same folder, as llama.cpp's GGUF downloads ship it). A model takes a tower when its family's
GGUF format names the projector its files pair with (GgufFormat.mmproj_projector, in ModelArgs.extra: qwen35moe's
qwen3vl_merger, gemma4's gemma4v)."""

from __future__ import annotations

from pathlib import Path

from engine.errors import ModelFormatError, RequestError, WispError
from engine.model.args import ModelArgs

PATTERN = "mmproj*.gguf"


def is_mmproj_name(path: Path) -> bool:
    """A file named as llama.cpp's converter names a tower (the picker lists it with its model, not as one)."""
    return path.suffix.lower() == ".gguf" and path.name.lower().startswith("mmproj")


def mmproj_beside(model_file: Path, projector: str | None = None) -> Path | None:
    """The first mmproj*.gguf in the model file's folder, in name order (--mmproj picks another); given the model's
    projector type, the first of that type (a folder of several models' files pairs each with its own), None when
    none is."""
    found = sorted(p for p in model_file.parent.glob("*.gguf") if is_mmproj_name(p) and p != model_file)
    if projector is not None:
        found = [p for p in found if projector_of(p) == projector]
    return found[0] if found else None


def projector_of(path: Path) -> str | None:
    """An mmproj file's projector type (clip.vision.projector_type), None for a file that is not one Wisp runs."""
    from engine.gguf.mmproj_file import MmprojFile

    try:
        return MmprojFile(path).projector
    except WispError:
        return None


def model_projector(args: ModelArgs) -> str | None:
    """llama.cpp's projector type of the towers the model takes (engine.gguf.mmproj_file), None for none."""
    return args.extra.get("mmproj_projector")


def takes_images(args: ModelArgs) -> bool:
    return model_projector(args) is not None


def paired_mmproj(model_file: Path, args: ModelArgs, mmproj: str | None) -> Path | None:
    """The tower a GGUF model loads with: `mmproj` (checked: it exists, the model takes images; its projector is
    checked when it is read), else the one of the model's projector type beside the model file when the model takes
    images, else None."""
    if mmproj is None:  # beside it: only a tower of the model's own kind (another model's is left alone)
        return mmproj_beside(model_file, model_projector(args)) if takes_images(args) else None
    path = Path(mmproj).expanduser()
    if not path.is_file():
        raise ModelFormatError(f"{path}: no such mmproj file")
    if not takes_images(args):
        raise RequestError(f"{path}: {model_file.name} ({args.model_type}) does not take images, so it takes no "
                           "mmproj vision tower")
    return path


def refuse_mmproj_for_folder(folder: Path, mmproj: str | None) -> None:
    """--mmproj pairs a tower with a GGUF file; a safetensors folder's tower is in its own files."""
    if mmproj is not None:
        raise RequestError(f"--mmproj pairs a vision tower with a .gguf model file; {folder} reads its tower "
                           "from its own safetensors files")
