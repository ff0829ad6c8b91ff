"""ModelSource: what the user named as MODEL, classified once (a safetensors folder, a folder of MXFP4 experts, a
GGUF file, an OpenAI-compatible server, or a benchmark shape), so every consumer branches on one kind."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from engine.errors import UnsupportedModelError
from engine.model.args import ModelArgs
from engine.model.config_file import read_args
from engine.loading.model_path import is_remote_url, resolve_model


class SourceKind(str, Enum):
    SAFETENSORS = "safetensors"  # a Hugging Face folder (or cache snapshot, or the bundled demo)
    MXFP4 = "mxfp4"  # a folder whose experts are stored MXFP4 (gpt-oss as published)
    GGUF = "gguf"  # one .gguf file: Wisp's engine or llama.cpp (engine.gguf.backend_choice)
    REMOTE = "remote"  # an OpenAI-compatible server's URL
    SHAPE = "shape"  # a benchmark shape (engine.model.shapes): planned, never loaded


@dataclass(frozen=True)
class ModelSource:
    """Open with `open_source(model)`. `location` is a folder, a file, a URL or a shape name; `args` is read when a
    folder or shape is opened (a GGUF file's come from its metadata when it is planned)."""

    kind: SourceKind
    location: str
    args: ModelArgs | None = field(default=None, compare=False, repr=False)

    @property
    def path(self) -> Path:
        return Path(self.location)

    @property
    def is_local_folder(self) -> bool:
        return self.kind in (SourceKind.SAFETENSORS, SourceKind.MXFP4)


def open_source(model: str | None) -> ModelSource:
    """MODEL as the user gave it -> its ModelSource; never downloads. A folder's config is read (and refused when
    unsupported or malformed) here, before anything large."""
    if is_remote_url(model):
        return ModelSource(SourceKind.REMOTE, str(model).strip())
    path = resolve_model(model)
    if path.suffix.lower() == ".gguf":
        return ModelSource(SourceKind.GGUF, str(path))
    args = read_args(path)
    kind = SourceKind.MXFP4 if args.experts.quant == "MXFP4" else SourceKind.SAFETENSORS
    return ModelSource(kind, str(path), args)


def shape_source(name: str) -> ModelSource:
    """A benchmark shape by name (engine.model.shapes.SHAPES): synthetic weights at a published geometry."""
    from engine.model.shapes import SHAPES

    if name not in SHAPES:
        raise UnsupportedModelError(f"no benchmark shape '{name}'; known: {', '.join(SHAPES)}")
    return ModelSource(SourceKind.SHAPE, name, SHAPES[name])
