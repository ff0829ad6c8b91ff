"""`wisp convert-gguf MODEL_DIR OUT.gguf [--type ...]`: write llama.cpp's GGUF file of a safetensors MoE model
(engine/gguf/convert.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from engine.gguf.convert import OUT_TYPES, convert, resolved_type
from engine.gguf.mmproj_writer import write_mmproj
from engine.model.families import FAMILIES
from engine.units import format_bytes


def register(commands) -> None:
    parser = commands.add_parser("convert-gguf", help="write a GGUF file (llama.cpp) of a safetensors MoE model")
    parser.add_argument("model_dir", help=f"Hugging Face model folder ({', '.join(convertible_types())})")
    parser.add_argument("out", help="the .gguf file to write")
    parser.add_argument("--type", default="auto", choices=(*OUT_TYPES, "auto"),
                        help="weight type; routers, norms and biases stay f32 (default auto: bf16 for a bf16 "
                             "checkpoint, else f16)")
    parser.add_argument("--mmproj", default=None, metavar="MMPROJ_OUT",
                        help="also write the vision tower of a vision-language checkpoint (Qwen3.5, Qwen3-VL, Gemma 4) "
                             "to this file, as llama.cpp's mmproj-*.gguf (q8_0 writes an f16 tower)")
    parser.set_defaults(handler=convert_command)


def convertible_types() -> list[str]:
    """The model_types whose family has a GGUF format: the ones convert-gguf writes."""
    return [model_type for model_type, family in FAMILIES.items() if family.gguf is not None]


def convert_command(cli_args) -> int:
    progress = print_progress if sys.stderr.isatty() else None
    result = convert(Path(cli_args.model_dir).expanduser(), Path(cli_args.out).expanduser(), cli_args.type, progress)
    print_result(result)
    if cli_args.mmproj is not None:
        print_result(write_mmproj(Path(cli_args.model_dir).expanduser(), Path(cli_args.mmproj).expanduser(),
                                  resolved_type(cli_args.type, Path(cli_args.model_dir).expanduser())))
    return 0


def print_result(result) -> None:
    print(f"wrote {result.path} ({result.architecture}, {result.num_tensors} tensors, "
          f"{format_bytes(result.size_bytes)})", file=sys.stderr)


def print_progress(fraction: float, tensor_name: str) -> None:
    sys.stderr.write(f"\r{fraction:6.1%} {tensor_name:<40}" + ("\n" if fraction >= 1 else ""))
    sys.stderr.flush()
