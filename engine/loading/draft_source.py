"""Where a model source keeps its draft (MTP / nextn) layer: a safetensors folder's own tensors
(engine.model.mtp_loader) or a GGUF file's nextn block (engine.gguf.draft_layer)."""

from __future__ import annotations

from engine.gguf.draft_layer import GgufDraftTensors, gguf_draft_layer
from engine.gguf.model_file import GgufModel
from engine.loading.source import ModelSource
from engine.model.args import ModelArgs
from engine.model.families import family
from engine.model.mtp_loader import CheckpointDraftTensors, DraftTensors, runnable_draft_layer
from engine.model.mtp_names import DraftLayerNames


def find_draft_layer(source: ModelSource, model_file: GgufModel | None,
                     args: ModelArgs) -> tuple[DraftLayerNames | None, str, bool]:
    """(the layout of the draft layer the source holds and Wisp runs, or None; why not, where None; whether the
    layer has its own output head). model_file: the source's GGUF file opened for Wisp's engine, else None."""
    if model_file is not None:
        return gguf_draft_layer(model_file)
    return runnable_draft_layer(source.path if source.is_local_folder else None, args)


def draft_tensors(source: ModelSource, model_file: GgufModel | None, args: ModelArgs,
                  names: DraftLayerNames) -> DraftTensors:
    if model_file is not None:
        return GgufDraftTensors(model_file)
    return CheckpointDraftTensors(source.path, args, family(args.model_type).weight_names, names)
