"""One large (prefill) MoE layer-step per expert format: the per-expert path (each expert dequantized, then ~7
kernels from Python) against the grouped GEMM (two launches), as ExpertLayout.run_blocks runs them. Prints per
format and prompt length: ms per layer-step (median of --repeats), kernel launches per layer-step
(torch.profiler), the largest difference between the two paths relative to the output's largest value, and
whether the grouped path gives the same bits when the experts come in two groups from a permuted slot table
(the pager's chunking by experts).

    python bench/prefill_moe_probe.py --tokens 512,2048,8192 --out DIR    # CUDA
    python bench/prefill_moe_probe.py --sweep --formats Q4_K_M,BF16 --tokens 512,8192 --out DIR

--sweep times the two grouped kernels alone (CUDA events, one layer-step's launches) at each tile configuration
of SWEEP or --configs (grouped_gemm.configuration()'s seven values: BM, gate_up BN, down BN, warps, stages, down
stages, swapped), with each kernel's shared memory, registers and spills, whether its bits equal the first
configuration's, and last one line per format and length naming the fastest. --device cpu --tiny runs the same
on small shapes in Triton's interpreter (a check of the script, not a timing):

    TRITON_INTERPRET=1 python bench/prefill_moe_probe.py --sweep --device cpu --tiny --tokens 24 --formats Q4_K_M
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from unittest import mock

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine.experts.formats.activation import SILU_GLU, ClampedSwiGlu, ExpertBias  # noqa: E402
from engine.quant.dense_layout import DenseLayout  # noqa: E402
from engine.experts.routing.dispatch import combine_grouped, start_layer  # noqa: E402
from engine.quant import expert_format  # noqa: E402
from engine.quant.expert_format import QuantExpertFormat  # noqa: E402
from engine.quant import grouped_gemm  # noqa: E402
from engine.quant.synthetic import random_blocks  # noqa: E402
from engine.runtime.determinism import use_deterministic_kernels  # noqa: E402

# name: (hidden, intermediate, experts, top_k, types or None for dense bf16, gpt-oss's activation and biases)
FORMATS = {
    "Q4_K_M": (2048, 768, 128, 8, ("Q4_K", "Q4_K", "Q6_K"), False),  # Qwen3-30B-A3B, a Q6_K-down layer
    "Q4_K": (2048, 768, 128, 8, ("Q4_K", "Q4_K", "Q4_K"), False),
    "Q5_K": (2048, 768, 128, 8, ("Q5_K", "Q5_K", "Q6_K"), False),
    "Q8_0": (2048, 768, 128, 8, ("Q8_0", "Q8_0", "Q8_0"), False),
    "BF16": (2048, 768, 128, 8, None, False),
    "MXFP4-gpt-oss": (2880, 2880, 32, 4, ("MXFP4", "MXFP4", "MXFP4"), True),  # gpt-oss-20b
}


TINY = {"hidden": 256, "intermediate": 256, "experts": 4}  # --tiny: shapes the interpreter runs in seconds


def layer_of(name: str, device, tiny: bool = False):
    hidden, inter, experts, top_k, types, gpt_oss = FORMATS[name]
    if tiny:
        hidden, inter, experts, top_k = TINY["hidden"], TINY["intermediate"], TINY["experts"], 2
    generator = torch.Generator(device=device).manual_seed(0)
    activation = ClampedSwiGlu(1.702, 7.0) if gpt_oss else SILU_GLU
    bias = None
    if gpt_oss:
        bias = ExpertBias(gate_up=torch.randn(experts, 2 * inter, generator=generator, device=device).bfloat16() * 0.02,
                          down=torch.randn(experts, hidden, generator=generator, device=device).bfloat16() * 0.02)
    if types is None:
        layout = DenseLayout(hidden, inter, torch.bfloat16, activation)
        layout.bias = bias
        table = (torch.randn(experts, layout.numel, generator=generator, device=device) * 0.02).bfloat16()
        return layout, table, top_k
    layout = QuantExpertFormat(hidden, inter, *types, activation=activation, bias=bias)
    table = torch.zeros(experts, layout.slot_bytes, dtype=torch.uint8, device=device)
    for spec in (layout.gate, layout.up, layout.down):
        table[:, spec.byte_offset : spec.end] = random_blocks(spec, experts, generator, device)
    return layout, table, top_k


def routed(tokens: int, experts: int, top_k: int, device):
    generator = torch.Generator(device=device).manual_seed(tokens)
    logits = torch.randn(tokens, experts, generator=generator, device=device)
    weights, ids = torch.topk(torch.softmax(logits, -1), top_k)
    return ids, (weights / weights.sum(-1, keepdim=True)).bfloat16()


def timed(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return float(np.median(times))


def launches(fn) -> int:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type.name == "CUDA")


def in_two_groups(layout, table, x, ids, weights):
    """The grouped path as the pager runs it: the odd-numbered experts first, then the others, each from a
    reversed copy of the table (expert e in row E - 1 - e)."""
    dispatch, out = start_layer(x, ids.cpu().numpy(), weights)
    moved, last = table.flip(0).contiguous(), table.shape[0] - 1
    units = np.arange(dispatch.experts.size)
    for group in (units[1::2], units[0::2]):
        layout.run_group(moved, dispatch, group, last - dispatch.experts[group], out)
    return combine_grouped(out, dispatch, ids)


def probe(name: str, tokens: int, repeats: int, device) -> dict:
    layout, table, top_k = layer_of(name, device)
    ids, weights = routed(tokens, table.shape[0], top_k, device)
    x = torch.randn(tokens, layout.hidden, device=device).bfloat16()
    step = lambda: layout.run_blocks(x, ids, weights, table)  # noqa: E731
    row = {"format": name, "tokens": tokens}
    outputs = {}
    for path in ("per_expert", "grouped"):
        with ExitStack() as stack:
            if path == "per_expert":  # the layouts' per-expert branch: runs_grouped answers no
                for module in (expert_format, grouped_gemm):
                    stack.enter_context(mock.patch.object(module, "runs_grouped", lambda *args: False))
            outputs[path] = step()
            row[f"{path}_ms"] = timed(step, repeats)
            row[f"{path}_launches"] = launches(step)
    scale = outputs["per_expert"].float().abs().max().item()
    row["max_diff_rel"] = (outputs["grouped"].float() - outputs["per_expert"].float()).abs().max().item() / scale
    row["grouped_repeatable"] = bool(torch.equal(step(), outputs["grouped"]))
    row["grouped_in_two_groups_equal"] = bool(torch.equal(in_two_groups(layout, table, x, ids, weights),
                                                          outputs["grouped"]))
    return row


# grouped_gemm.configuration()'s seven values; the first is the engine's default before this sweep (the reference of
# bits_equal_first). Swapped (last value 1): the weight rows on the tensor cores' M side, BM tokens on their N side.
SWEEP = [(128, 32, 64, 8, 3, 1, 0), (64, 64, 128, 8, 3, 3, 0),
         (16, 64, 64, 4, 3, 3, 1), (32, 64, 64, 4, 3, 3, 1), (32, 64, 128, 4, 3, 3, 1), (32, 128, 128, 8, 3, 3, 1),
         (64, 64, 64, 4, 3, 3, 1), (64, 64, 128, 4, 3, 3, 1), (64, 128, 128, 8, 3, 3, 1), (128, 64, 128, 8, 3, 2, 1),
         (128, 128, 128, 8, 3, 2, 1), (32, 64, 64, 4, 4, 4, 1)]


def kernel_ms(layout, table, x, ids, weights, repeats: int):
    """The grouped kernels of one layer-step alone -> (ms median, the two compiled kernels, the output)."""
    dispatch, rows = start_layer(x, ids.cpu().numpy(), weights)
    units = np.arange(dispatch.experts.size)
    expert = grouped_gemm.GroupedExpert.dense(layout.hidden, layout.intermediate, torch.bfloat16, layout.activation,
                                              layout.bias) if isinstance(layout, DenseLayout) else layout.grouped
    first = rows.clone()
    kernels = grouped_gemm.run_grouped(expert, table, dispatch, units, dispatch.experts, first)
    times = []
    for _ in range(repeats):
        out = rows.clone()
        if x.device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            grouped_gemm.run_grouped(expert, table, dispatch, units, dispatch.experts, out)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            began = time.perf_counter()
            grouped_gemm.run_grouped(expert, table, dispatch, units, dispatch.experts, out)
            times.append((time.perf_counter() - began) * 1e3)
    return float(np.median(times)), kernels, first


def sweep(name: str, tokens: int, repeats: int, device, configs, tiny: bool = False) -> list[dict]:
    """Each configuration (through grouped_gemm.sweep_tiles) -> a row: kernel ms, GB/s of the weights read once,
    shared memory, registers, spills, and whether its bits equal the first configuration's."""
    layout, table, top_k = layer_of(name, device, tiny)
    ids, weights = routed(tokens, table.shape[0], top_k, device)
    x = torch.randn(tokens, layout.hidden, device=device).bfloat16()
    rows, reference = [], None
    weight_bytes = table[:, :].numel() * table.element_size()  # every expert is touched at these lengths
    for config in configs:
        row = {"format": name, "tokens": tokens, "config": list(config)}
        try:
            with grouped_gemm.sweep_tiles(",".join(str(v) for v in config)):
                row["kernels_ms"], kernels, out = kernel_ms(layout, table, x, ids, weights, repeats)
            row["weights_gb_s"] = weight_bytes / row["kernels_ms"] / 1e6
            row["kernels"] = [{"shared": getattr(k.metadata, "shared", None), "registers": getattr(k, "n_regs", None),
                               "spills": getattr(k, "n_spills", None),
                               "stages": getattr(k.metadata, "num_stages", None)} for k in kernels if k is not None]
            reference = out if reference is None else reference
            row["bits_equal_first"] = bool(torch.equal(out, reference))
        except Exception as err:  # noqa: BLE001 - a configuration that does not fit is a result
            row["error"] = f"{type(err).__name__}: {str(err)[:300]}"
        print(json.dumps(row), flush=True)
        rows.append(row)
    timed_rows = [r for r in rows if "kernels_ms" in r]
    if timed_rows:
        best = min(timed_rows, key=lambda r: r["kernels_ms"])
        print(json.dumps({"best": True, "format": name, "tokens": tokens, "config": best["config"],
                          "kernels_ms": best["kernels_ms"], "first_ms": timed_rows[0]["kernels_ms"]}), flush=True)
    return rows


def parse_configs(text: str) -> list[tuple[int, ...]]:
    """'128,32,64,8,3,1,0;32,64,64,4,3,3,1' -> configurations of seven integers."""
    configs = [tuple(int(v) for v in part.split(",")) for part in text.split(";") if part.strip()]
    if any(len(c) != 7 for c in configs):
        raise SystemExit(f"--configs {text!r}: give ;-separated BM,BN_GATE_UP,BN_DOWN,WARPS,STAGES,DOWN_STAGES,SWAP")
    return configs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", default="512,2048,8192")
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sweep", action="store_true", help="time the grouped kernels at each tile config")
    parser.add_argument("--configs", default="", help="with --sweep: ;-separated configurations instead of SWEEP")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="with --sweep: small shapes (a CPU check of the script)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    device = torch.device(args.device)
    configs = parse_configs(args.configs) if args.configs else SWEEP
    use_deterministic_kernels()
    rows = []
    for name in args.formats.split(","):
        for tokens in [int(t) for t in args.tokens.split(",")]:
            if args.sweep:
                rows += sweep(name, tokens, args.repeats, device, configs, args.tiny)
            else:
                rows.append(probe(name, tokens, args.repeats, device))
                print(json.dumps(rows[-1]), flush=True)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        gpu = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"
        (args.out / f"prefill_moe_{'sweep' if args.sweep else 'probe'}.json").write_text(
            json.dumps({"gpu": gpu, "torch": torch.__version__, "rows": rows}))


if __name__ == "__main__":
    main()
