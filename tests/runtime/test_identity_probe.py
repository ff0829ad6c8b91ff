"""bench.identity: every arm against resident, bit for bit (CPU here; tests/gpu runs it at the Qwen3 shape)."""

from __future__ import annotations

import json

import torch

from bench import identity
from engine.cli import build_parser
from engine.cli.options import engine_options
from engine.runtime.determinism import use_deterministic_kernels

MLP = identity.PARTS.index("mlp")
ARGS = ["--shape", "qwen3-topology-tiny", "--layers", "3", "--trace", "resources/traces/qwen3-twin_code.npz",
        "--device", "cpu", "--budget", "0.6", "--prompt", "24", "--tokens", "5", "--seeds", "2", "--warmup"]


def test_every_arm_matches_resident_and_each_part_is_checked(capsys):
    assert identity.main(ARGS) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    compared = {(row["decode"], row["arm"]) for row in rows if row["arm"] != "resident"}
    assert compared == {(decode, arm) for decode in ("static", "dynamic")
                        for arm in ("resident-again", "paged-all", "wisp", "wisp-host", "static-uva")}
    assert all(row["first_difference"] is None for row in rows if row["arm"] != "resident")
    assert all(row["first_part_difference"] is None for row in rows if row["decode"] == "dynamic")


def test_a_one_ulp_change_in_one_part_is_named():
    sums = {(1, 0, 1): identity.checksum(torch.ones(4, dtype=torch.bfloat16)),
            (2, 1, MLP): identity.checksum(torch.ones(4, dtype=torch.bfloat16))}
    nudged = torch.ones(4, dtype=torch.bfloat16)
    nudged.view(torch.int16)[3] += 1  # the next bfloat16 after 1.0
    changed = {**sums, (2, 1, MLP): identity.checksum(nudged)}
    assert identity.first_part_difference(sums, changed) == {"step": 2, "layer": 1, "part": "mlp"}
    assert identity.first_part_difference(sums, dict(sums)) is None


def test_deterministic_kernels_are_the_default_and_can_be_turned_off():
    before = torch.are_deterministic_algorithms_enabled()
    try:
        use_deterministic_kernels(True)
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.is_deterministic_algorithms_warn_only_enabled()  # an op without one warns, never fails
        use_deterministic_kernels(False)
        assert not torch.are_deterministic_algorithms_enabled()
    finally:
        torch.use_deterministic_algorithms(before)
    parser = build_parser()
    assert engine_options(parser.parse_args(["run", "--prompt", "hi"])).deterministic
    assert not engine_options(parser.parse_args(["run", "--prompt", "hi", "--nondeterministic"])).deterministic


def test_a_stray_write_into_the_dense_weights_is_caught():
    layer = torch.nn.Linear(8, 8).to(torch.bfloat16)
    before = identity.weight_sums(layer)
    with torch.no_grad():
        layer.weight.view(-1).view(torch.int16)[5] += 1  # one ulp of one weight
    after = identity.weight_sums(layer)
    assert [name for name in after if after[name] != before[name]] == ["weight"]
