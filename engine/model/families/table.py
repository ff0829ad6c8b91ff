"""The architectures table of the docs, generated from the registry: one row per family (docs/models.md holds it
between the markers below, and tests/model/test_registry.py checks that it is this table)."""

from __future__ import annotations

from engine.model.families.family import Family
from engine.model.families.registry import FAMILIES

BEGIN, END = "<!-- architectures -->", "<!-- /architectures -->"
HEADER = ("| model_type | examples | files | layers |\n"
          "|---|---|---|---|")


def files(family: Family) -> str:
    """What Wisp reads of the family: a safetensors folder and, where its family has one, a GGUF file."""
    folder = "folder (bf16, fp16, fp32" + (", MXFP4 experts" if family.reads_quantization else "") + ")"
    return folder + (f"; GGUF `{family.gguf.arch}`" if family.gguf else "")


def row(family: Family) -> str:
    return f"| `{family.model_type}` | {', '.join(family.examples)} | {files(family)} | {family.layers} |"


def architectures_table() -> str:
    """The markdown table, markers included."""
    rows = "\n".join(row(family) for family in FAMILIES.values())
    return f"{BEGIN}\n{HEADER}\n{rows}\n{END}"


def table_in(text: str) -> str | None:
    """The marked table of a document (markers included), or None where it has no markers."""
    start = text.find(BEGIN)
    end = text.find(END, start)
    if start < 0 or end < 0:
        return None
    return text[start:end + len(END)]
