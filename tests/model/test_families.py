"""One place per architecture: every family resolves through the one registry from both formats, every family has
its tiny model, and no module outside engine/model/families branches on an architecture's name."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from engine.errors import UnsupportedModelError
from engine.model.checkpoint import Checkpoint
from engine.model.config_file import read_args
from engine.model.families import FAMILIES, GGUF_ARCHITECTURES, family, gguf_family
from tests.tiny_models import GGUF_MODEL_TYPES, HYBRID_TYPES, MODEL_TYPES

ENGINE = Path(__file__).resolve().parents[2] / "engine"
FAMILY_DIR = ENGINE / "model" / "families"
NAMES = set(FAMILIES) | set(GGUF_ARCHITECTURES)


@pytest.mark.parametrize("model_type", sorted(FAMILIES))
def test_each_family_is_one_module_resolved_from_both_formats(model_type):
    found = FAMILIES[model_type]
    assert found.model_type == model_type and family(model_type) is found
    assert importlib.import_module(f"engine.model.families.{model_type}").FAMILY is found
    if found.gguf is not None:
        assert found in GGUF_ARCHITECTURES[found.gguf.arch]


def test_every_family_module_is_registered():
    defines = re.compile(r"^FAMILY = Family\(", re.M)
    modules = {path.stem for path in FAMILY_DIR.glob("*.py") if defines.search(path.read_text())}
    assert modules == set(FAMILIES)


def test_no_family_imports_another():
    """A family is read alone: shared parts live in shared modules, not in another family's file."""
    for model_type in FAMILIES:
        tree = ast.parse((FAMILY_DIR / f"{model_type}.py").read_text())
        imported = {alias.name.rsplit(".", 1)[-1] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                    and node.module == "engine.model.families" for alias in node.names}
        imported |= {node.module.rsplit(".", 1)[-1] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                     and (node.module or "").startswith("engine.model.families.")}
        assert not imported & (set(FAMILIES) - {model_type}), model_type


def test_tiny_models_cover_every_family():
    assert sorted(MODEL_TYPES) == sorted(FAMILIES)
    # gpt_oss's, the hybrids' and the later families' GGUF files have their own tests (tests/gguf/
    # test_gpt_oss_gguf.py, test_hybrid_*.py, test_glm4_moe_lite_gguf.py, test_lfm2_moe_gguf.py,
    # test_gemma4_gguf.py, test_nemotron_h_gguf.py)
    own_tests = ["gpt_oss", *HYBRID_TYPES, "glm4_moe_lite", "lfm2_moe", "gemma4", "gemma4_text", "nemotron_h"]
    assert sorted([*GGUF_MODEL_TYPES, *own_tests]) == sorted(known.model_type for sharing in GGUF_ARCHITECTURES.values()
                                                             for known in sharing)


@pytest.mark.parametrize("model_type", MODEL_TYPES)
def test_a_tiny_checkpoint_reads_through_its_family(model_type, tiny_model_dir):
    """Its config.json parses to the family, and the family's weight names are the checkpoint's."""
    folder = tiny_model_dir(model_type)
    args = read_args(folder)
    assert args.model_type == model_type
    names = family(model_type).weight_names
    assert Checkpoint(folder).has(names.router_weight(args.moe_layers.index(True)))


def test_unknown_and_dense_types_are_refused_by_name():
    with pytest.raises(UnsupportedModelError, match="dense"):
        family("llama")
    with pytest.raises(UnsupportedModelError, match="supported: deepseek_v2"):
        family("no_such_model")
    assert gguf_family("gemma3") is None


def branches_on_names(tree: ast.AST) -> list[str]:
    """Comparisons of a model_type or architecture against a family's name, and tables keyed by family names."""
    found = []
    for node in ast.walk(tree):
        strings = {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        if isinstance(node, ast.Compare):
            idents = [n.attr if isinstance(n, ast.Attribute) else n.id for n in ast.walk(node)
                      if isinstance(n, (ast.Name, ast.Attribute))]
            if strings & NAMES and any("model_type" in i or "arch" in i for i in idents):
                found.append(ast.unparse(node))
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            if len(keys & NAMES) >= 2:
                found.append(ast.unparse(node)[:80])
    return found


def test_no_module_outside_the_families_branches_on_an_architecture():
    """Adding an architecture touches its family file and the registry line, nothing else in the engine."""
    offenders = {}
    for path in ENGINE.rglob("*.py"):
        if FAMILY_DIR in path.parents:
            continue
        found = branches_on_names(ast.parse(path.read_text()))
        if found:
            offenders[str(path.relative_to(ENGINE))] = found
    assert offenders == {}


def test_the_scan_finds_a_branch():
    assert branches_on_names(ast.parse('x = 1 if args.model_type == "gpt_oss" else 2'))
    assert branches_on_names(ast.parse('T = {"qwen3_moe": 1, "mixtral": 2}'))
    assert not branches_on_names(ast.parse('x = args.window(layer) == 3'))
