"""One registry of architectures feeds the docs' table, `wisp convert-gguf`, the benchmark shapes; the decoder
stack builds each layer's variants from tables of objects, never from a branch on a family's flag."""

from __future__ import annotations

import argparse
import re
from dataclasses import replace
from pathlib import Path

import pytest

from engine.model.families import FAMILIES, parse_config
from engine.model.families.table import BEGIN, architectures_table, table_in

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = (ROOT / "README.md", ROOT / "docs" / "models.md")


def test_the_docs_architectures_table_is_the_registrys():
    """docs/models.md (or the README) holds the generated table between its markers; regenerate it with
    `python -c "from engine.model.families.table import architectures_table as t; print(t())"`."""
    tables = {path.name: table_in(path.read_text()) for path in DOCUMENTS if path.exists()}
    found = {name: table for name, table in tables.items() if table is not None}
    assert found, f"no {BEGIN} table in {', '.join(path.name for path in DOCUMENTS)}"
    for name, table in found.items():
        assert table == architectures_table(), f"{name}: the architectures table differs from the registry's"


def test_the_table_has_one_row_per_family():
    rows = architectures_table().splitlines()[3:-1]
    assert [re.match(r"\| `(\w+)` \|", row).group(1) for row in rows] == list(FAMILIES)
    assert all(FAMILIES[name].examples and FAMILIES[name].layers for name in FAMILIES)


def test_convert_gguf_offers_the_families_with_a_gguf_format():
    from engine.cli import convert_gguf

    commands = argparse.ArgumentParser().add_subparsers()
    convert_gguf.register(commands)
    help_text = " ".join(commands.choices["convert-gguf"].format_help().split())
    for model_type, family in FAMILIES.items():
        assert (model_type in help_text) == (family.gguf is not None), model_type


def test_each_published_config_is_a_benchmark_shape_of_its_family():
    from engine.model.shapes import SHAPES

    for family in FAMILIES.values():
        for name, config in family.shapes.items():
            assert config["model_type"] == family.model_type
            assert SHAPES[name] == replace(parse_config(config), torch_dtype="bfloat16")
    assert {args.model_type for args in SHAPES.values()} <= set(FAMILIES)


def test_every_router_kind_routes_some_benchmark_shape():
    from engine.model.routers import ROUTERS
    from engine.model.shapes import SHAPES

    assert {args.router.kind for args in SHAPES.values()} == set(ROUTERS)


@pytest.mark.parametrize("module", ["transformer.py", "hybrid.py"])
def test_the_decoder_stack_branches_on_no_variant_field(module):
    """Which attention, router and RoPE a layer has is a table lookup in the blocks' modules, not an `if` here."""
    source = (ROOT / "engine" / "model" / module).read_text()
    variant_fields = r"args\.(router|topk_method|rope_layout|is_mla|kv_lora_rank|attention_sinks|model_type)\b"
    assert not re.search(rf"(if|elif)\s[^\n]*{variant_fields}", source)
