"""The --shape and --layers options of every benchmark command (the shapes: engine.model.shapes)."""

from __future__ import annotations

from engine.model.args import ModelArgs
from engine.model.shapes import SHAPES, shape


def add_shape_options(parser, layers: int | None = None, device: bool = True) -> None:
    """--shape and --layers (and --device) of every benchmark command; shape_of(args) reads them back."""
    parser.add_argument("--shape", default="qwen3-30b-a3b", choices=sorted(SHAPES))
    parser.add_argument("--layers", type=int, default=layers, help="cut the shape to its first N layers (host RAM)")
    if device:
        parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])


def shape_of(args) -> ModelArgs:
    """The shape --shape names, cut to --layers; a cut that cannot run is one line and exit status 2."""
    try:
        return shape(args.shape, args.layers)
    except ValueError as err:
        raise SystemExit(f"wisp bench: {err}") from None
