"""What llama.cpp's graphs fix that a Hugging Face config leaves free: the checks `wisp convert-gguf` runs (through
a family's GgufFormat.check_convertible) before writing a file llama.cpp would compute differently."""

from __future__ import annotations

from engine.errors import UnsupportedModelError
from engine.model.args import ModelArgs


def fixed_renormalisation(args: ModelArgs, arch: str, renormalises: bool) -> None:
    """llama.cpp's `arch` graph always (or never) renormalises the top-k router weights."""
    normalize = args.router.norm_topk_prob
    if normalize != renormalises:
        raise UnsupportedModelError(
            f"{args.model_type} with norm_topk_prob={str(normalize).lower()}: llama.cpp's {arch} graph "
            f"{'always' if renormalises else 'never'} renormalises the top-k router weights, so its GGUF would "
            "compute a different model")


def experts_in_every_layer(args: ModelArgs, arch: str) -> None:
    if not all(args.moe_layers):
        raise UnsupportedModelError(f"llama.cpp's {arch} expects experts in every layer; this checkpoint has dense "
                                    "layers (mlp_only_layers / decoder_sparse_step)")


def renormalising_moe(arch: str, renormalises: bool):
    """The check of an architecture whose graph fixes renormalisation and runs experts in every layer."""

    def check(args: ModelArgs) -> None:
        fixed_renormalisation(args, arch, renormalises)
        experts_in_every_layer(args, arch)

    return check
