"""`wisp configure`: the offline MV-WSA configurator. Prints the split of a budget between dense weights,
each layer's expert slots and KV blocks, with predicted decode tok/s and TTFT, beside a fixed 50/50 split,
an expert-heavy split with no KV floor, and the exhaustive oracle of the same cost model."""

from __future__ import annotations

import json
from argparse import Namespace
from pathlib import Path

from engine.alloc.memory_plan import GiB, kv_floor_bytes, minimum_budget, state_bytes, workspace_bytes
from engine.loading.model_path import DEMO_MODEL
from engine.alloc.mvwsa import PoolSpec, Split, configure
from engine.config import DENSE_QUANTS, DENSE_WEIGHTS, DEVICES, DTYPE_CHOICES, EngineOptions
from engine.errors import BudgetError, RequestError
from engine.loading.plan import LoadPlan, plan_for
from engine.loading.source import open_source, shape_source
from engine.model.args import ModelArgs
from engine.traces.format import load as load_trace
from engine.traces.profile import routing_profile
from engine.units import format_bytes
from engine.cli.options import size, whole


MiB = 2**20
DEMO = "demo"
DEMO_TRACE = DEMO_MODEL.parents[1] / "resources" / "traces" / "demo_chat.npz"  # recorded on the demo model


def size_text(num_bytes: float) -> str:
    """GiB from 1 GiB up, MiB below (two decimals under 1 MiB), as the README writes sizes."""
    if num_bytes >= GiB:
        return f"{num_bytes / GiB:.2f} GiB"
    return f"{num_bytes / MiB:.1f} MiB" if num_bytes >= MiB else f"{num_bytes / MiB:.2f} MiB"


def model_argument(model: str | None) -> str:
    """The model as the loaders take it: omitted or "demo" is the bundled demo model."""
    return str(DEMO_MODEL) if model in (None, "", DEMO) else model


def trace_argument(cli: Namespace) -> Path:
    if cli.trace is not None:
        return Path(cli.trace)
    if model_argument(cli.model) == str(DEMO_MODEL):
        return DEMO_TRACE
    raise RequestError("--trace is needed for this model: record one with `wisp trace record MODEL` "
                       "(the demo model has its own)", "trace")


def configure_plan(cli: Namespace) -> LoadPlan:
    """The engine's plan of the named model (a folder, HF cache id or benchmark shape) at the options asked for:
    the sizes and the planner's request the configurator splits, as a load would get them."""
    from engine.model.shapes import SHAPES

    model = model_argument(cli.model)
    source = shape_source(model) if model in SHAPES else open_source(model)
    options = EngineOptions(model=model, device=cli.device, dtype=cli.dtype, experts="paged",
                            budget_bytes=cli.budget, max_num_seqs=cli.concurrency, max_model_len=cli.max_context,
                            dense_weights=getattr(cli, "dense_weights", "auto"),
                            dense_quant=getattr(cli, "dense_quant", None))
    return plan_for(source, options)


def check_topology(args: ModelArgs, header) -> None:
    if (args.num_moe_layers, args.num_experts, args.num_experts_per_tok) != (header.num_layers, header.num_experts, header.top_k):
        raise RequestError(
            f"the trace has {header.num_layers} layers x {header.num_experts} experts top-{header.top_k}, "
            f"the model {args.num_moe_layers} x {args.num_experts} top-{args.num_experts_per_tok}; record a trace "
            "of this model (wisp trace record) or pick a matching one")


def configure_model(plan: LoadPlan, trace_path: Path):
    from engine.experts.pager.calibrate import estimated_compute, link_cost

    args, sizes, request, budget = plan.args, plan.sizes, plan.request, plan.request.budget_bytes
    trace = load_trace(trace_path)
    check_topology(args, trace.header)
    workspace = workspace_bytes(sizes, request.max_batched_tokens, request.max_num_seqs)
    pool = budget - sizes.dense_bytes - workspace - state_bytes(sizes, request)
    floor = kv_floor_bytes(sizes, request.max_num_seqs, request.max_model_len)
    needed = floor + args.num_moe_layers * args.num_experts_per_tok * sizes.expert_bytes
    if pool < needed:
        minimum = minimum_budget(sizes, request)
        raise BudgetError(f"a budget of {format_bytes(budget)} is below this model's minimum of "
                          f"{format_bytes(minimum)} (dense weights, workspace and state, the KV floor "
                          f"{format_bytes(floor)}, and top-k expert slots in every layer); pass --budget "
                          f"{format_bytes(minimum).replace(' ', '')} or more")
    active = args.num_moe_layers * args.num_experts_per_tok * sizes.expert_bytes
    dense_s, token_s = estimated_compute(sizes.dense_bytes, active, args.num_hidden_layers, plan.device)
    link = link_cost(plan.device, dense_s, token_s)
    spec = PoolSpec(pool_bytes=pool, expert_bytes=sizes.expert_bytes, kv_floor_bytes=floor)
    return configure(routing_profile(trace), link, spec), link, spec


def split_row(split: Split, block_bytes: int) -> dict:
    slots = split.layer_slots
    return {"name": split.name, "expert_gib": split.expert_bytes / GiB, "kv_gib": split.kv_bytes / GiB,
            "kv_blocks": max(0, split.kv_bytes // block_bytes), "slots_min": min(slots), "slots_max": max(slots),
            "slots_total": sum(slots), "layer_slots": list(slots), "predicted_decode_tok_s": split.decode_tok_s,
            "predicted_ttft_s": split.ttft_s, "feasible": split.is_feasible}


def configure_command(cli: Namespace) -> int:
    from engine.system.hardware import device_name  # torch: imported on use

    plan = configure_plan(cli)
    splits, link, spec = configure_model(plan, trace_argument(cli))
    sizes, device = plan.sizes, plan.device
    block_bytes = plan.request.block_size * sizes.kv_bytes_per_token
    rows = {key: split_row(split, block_bytes) for key, split in splits.items()}
    if cli.json:
        print(json.dumps({"dense_gib": sizes.dense_bytes / GiB, "pool_gib": spec.pool_bytes / GiB,
                          "kv_floor_gib": spec.kv_floor_bytes / GiB, "link": link.__dict__, "splits": rows}))
        return 0
    print(f"dense weights {size_text(sizes.dense_bytes)} | pool {size_text(spec.pool_bytes)} | "
          f"KV floor {size_text(spec.kv_floor_bytes)} | link {link.h2d_bytes_per_s / 1e9:.1f} GB/s "
          f"({'measured' if device.type == 'cuda' else 'CPU copy rate'}) on {device_name(device)}")
    print(f"{'split':28} {'experts':>11} {'KV':>11} {'slots/layer':>12} {'tok/s':>7} {'TTFT s':>7} feasible")
    for row in distinct_rows(rows):
        print(f"{row['name']:28} {size_text(row['expert_gib'] * GiB):>11} {size_text(row['kv_gib'] * GiB):>11} "
              f"{row['slots_min']:>5}-{row['slots_max']:<6} {row['predicted_decode_tok_s']:>7.1f} "
              f"{row['predicted_ttft_s']:>7.2f} {'yes' if row['feasible'] else 'NO'}")
    print("configured slots per layer:", " ".join(map(str, rows["configured"]["layer_slots"])))
    return 0


def distinct_rows(rows: dict[str, dict]) -> list[dict]:
    """The table's rows, a row equal to an earlier one (the configured split is MV-WSA's) printed once."""
    shown: list[dict] = []
    for row in rows.values():
        if row not in shown:
            shown.append(row)
    return shown


def register(commands) -> None:
    parser = commands.add_parser("configure", help="MV-WSA: split a budget between expert slots and KV from a trace")
    parser.add_argument("model", nargs="?", default=DEMO,
                        help="model folder, HF cache id, \"demo\" (the default: the bundled demo model), or a shape: "
                             "qwen3-30b-a3b, olmoe-1b-7b, mixtral-8x7b, gpt-oss-20b, glm-4.5-air")
    parser.add_argument("--budget", type=size, required=True, help="device memory budget, e.g. 12GiB")
    parser.add_argument("--trace", default=None,
                        help="routing trace (.npz, see wisp trace); the demo model's own by default for the demo")
    parser.add_argument("--concurrency", type=whole(1, 4096), default=1)
    parser.add_argument("--max-context", type=whole(2, 2**31 - 1), default=4096)
    parser.add_argument("--device", default="auto", choices=list(DEVICES))
    parser.add_argument("--dtype", default="auto", choices=list(DTYPE_CHOICES),
                        help="compute dtype, as the engine picks it (auto: the checkpoint's on a GPU, float32 on the CPU)")
    parser.add_argument("--dense-weights", default="auto", choices=list(DENSE_WEIGHTS),
                        help=".gguf: dense tensors planned in the file's quant blocks (file) or the compute dtype "
                             "(dtype), as `wisp run --dense-weights` loads them (auto: file on CUDA)")
    parser.add_argument("--dense-quant", default=None, choices=list(DENSE_QUANTS),
                        help="checkpoint: dense weights planned as Q8_0 blocks, as `wisp run --dense-quant` loads "
                             "them (which changes the outputs)")
    parser.add_argument("--json", action="store_true")
    parser.set_defaults(handler=configure_command)
