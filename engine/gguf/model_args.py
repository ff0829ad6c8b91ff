"""ModelArgs from a GGUF file's metadata (`{arch}.*` keys) and tensor shapes: general.architecture picks the family
(engine.model.families), whose GgufFormat.read_metadata reads the rest."""

from __future__ import annotations

from dataclasses import replace

from engine.errors import ModelFormatError, UnsupportedModelError
from engine.gguf.reader import GgufFile
from engine.model.args import ModelArgs
from engine.model.families import Family, GgufKeys, gguf_family
from engine.model.families.registry import supported_gguf_architectures

# GGMLQuantizationType of the embedding -> torch_dtype; a quantized file computes in bf16 (its dense weights are
# dequantized to it), which engine.model.loader.resolve_dtype applies on a GPU like a checkpoint's own dtype.
FLOAT_DTYPES = {0: "float32", 1: "float16", 30: "bfloat16"}
QUANTIZED_DTYPE = "bfloat16"


def architecture_of(file: GgufFile) -> str:
    """general.architecture; ModelFormatError when missing."""
    arch = file.get("general.architecture")
    if not isinstance(arch, str):
        raise ModelFormatError(f"{file.path}: no general.architecture in the GGUF metadata")
    return arch


def family_of(file: GgufFile) -> Family:
    """The file's family, or UnsupportedModelError naming the architecture when Wisp's engine does not run it."""
    arch = architecture_of(file)
    if gguf_family(arch) is None:
        raise UnsupportedModelError(f"{file.path}: architecture '{arch}' is not one Wisp's engine runs "
                                    f"({supported_gguf_architectures()})")
    family = gguf_family(arch, GgufKeys(file, arch))
    if family is None:
        raise UnsupportedModelError(f"{file.path}: this '{arch}' file is none of the models Wisp's engine runs as "
                                    f"'{arch}' ({supported_gguf_architectures()}): {unread_reason(arch, file)}")
    if not int(file.get(f"{arch}.expert_count") or 0) > 1:
        raise UnsupportedModelError(f"{file.path}: a dense '{arch}' model (no {arch}.expert_count); Wisp's engine "
                                    "runs Mixture-of-Experts models")
    return family


def unread_reason(arch: str, file: GgufFile) -> str:
    """Why no family of `arch` reads the file, as the families that share it say (GgufFormat.refusal)."""
    from engine.model.families import GGUF_ARCHITECTURES

    return "; ".join(known.gguf.refusal for known in GGUF_ARCHITECTURES[arch])


def model_args(file: GgufFile) -> ModelArgs:
    """Every ModelArgs field from the metadata, checked against the tensors. Raises UnsupportedModelError for an
    architecture or feature the engine does not run, ModelFormatError naming a missing or inconsistent key."""
    family = family_of(file)
    key = GgufKeys(file, family.gguf.arch)
    embedding = key.tensor("token_embd.weight")
    args = family.gguf.read_metadata(key)
    images = {"mmproj_projector": family.gguf.mmproj_projector} if family.gguf.mmproj_projector else {}
    facts = {"torch_dtype": FLOAT_DTYPES.get(embedding.qtype, QUANTIZED_DTYPE),
             "extra": {**args.extra, "gguf_architecture": family.gguf.arch, "gguf_path": str(file.path), **images}}
    return replace(args, **facts)
