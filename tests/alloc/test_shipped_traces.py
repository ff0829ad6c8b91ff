"""On every shipped trace, the configured split is within 3% of the exhaustive oracle of the same cost model,
and the per-layer shares are never predicted slower than the uniform cap (MV-WSA, issue 5)."""

from pathlib import Path

import pytest

from engine.alloc.cost_model import DEFAULT_LINK
from engine.alloc.memory_plan import GiB, kv_floor_bytes, workspace_bytes
from engine.alloc.mvwsa import PoolSpec, configure
from engine.model.config_file import read_args
from engine.model.shapes import SHAPES
from engine.model.sizes import model_sizes
from engine.loading.model_path import DEMO_MODEL
from engine.traces.format import load
from engine.traces.profile import routing_profile

TRACES = sorted(Path("resources/traces").glob("*.npz"))
SHAPE_OF = {"qwen3-twin": "qwen3-30b-a3b", "olmoe-twin": "olmoe-1b-7b", "mixtral-twin": "mixtral-8x7b",
            "qwen3-published": "qwen3-30b-a3b", "gpt-oss-assumed": "gpt-oss-20b", "glm45air-assumed": "glm-4.5-air"}
BUDGET_GIB = {"qwen3-twin": 12, "olmoe-twin": 6, "mixtral-twin": 40, "demo": 0.75, "qwen3-published": 12,
              "gpt-oss-assumed": 12, "glm45air-assumed": 40}


def args_for(trace_path: Path):
    twin = trace_path.stem.split("_")[0]
    return (read_args(DEMO_MODEL) if twin == "demo" else SHAPES[SHAPE_OF[twin]]), BUDGET_GIB[twin]


@pytest.mark.parametrize("trace_path", TRACES, ids=lambda p: p.stem)
def test_configured_split_is_within_3_percent_of_the_oracle(trace_path):
    args, budget_gib = args_for(trace_path)
    sizes = model_sizes(args, 2)
    pool = int(budget_gib * GiB) - sizes.dense_bytes - workspace_bytes(sizes, 4096, 1)
    spec = PoolSpec(pool, sizes.expert_bytes, kv_floor_bytes(sizes, 1, 4096))
    splits = configure(routing_profile(load(trace_path)), DEFAULT_LINK, spec)
    configured, oracle = splits["configured"], splits["oracle"]
    assert configured.is_feasible
    assert configured.decode_step_s <= 1.03 * oracle.decode_step_s
    assert configured.decode_step_s <= splits["uniform"].decode_step_s + 1e-12
