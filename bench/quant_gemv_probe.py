"""Time the quantized decode GEMVs on a CUDA GPU at the Qwen3-30B-A3B expert shape (hidden 2048, moe
intermediate 768, top-8): one layer-step = gate_up GEMV + down GEMV (silu(gate) * up fused into its input) + the
routing-weight scale, over gathered slots of a 128-expert table (larger than L2, each step routed to experts drawn
at random). Steps are captured in a CUDA graph and replayed, as decode runs. Prints one JSON line per case: us per
layer-step and GB/s of quantized bytes read; then the GEMV kernels and splits side by side, and the bf16 path
(engine.experts.formats.kernel.gathered_experts on gathered bf16 blocks) as the baseline.

    python bench/quant_gemv_probe.py [--steps 64] [--tokens 1 4]"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine.experts.routing.dispatch import combine  # noqa: E402
from engine.experts.formats.kernel import gathered_experts  # noqa: E402
from engine.quant.expert_format import QuantExpertFormat  # noqa: E402
from engine.quant.linear import gathered_gemv_triton, wide_gemv_triton, word_gemv_triton  # noqa: E402

HIDDEN, INTERMEDIATE, EXPERTS, TOP_K = 2048, 768, 128, 8
FORMATS = {"Q4_K_M": ("Q4_K", "Q4_K", "Q6_K"), "Q4_K": ("Q4_K",) * 3, "Q8_0": ("Q8_0",) * 3}
WORD_CONFIGS = {  # word_gemv splits by type: (rows per program, super-blocks per step, warps)
    "Q4_K": [(2, 8, 1)],
    "Q6_K": [(4, 1, 1)],
    "Q8_0": [(2, 1, 1)]}
WIDE_CONFIGS = {  # wide_gemv splits by type and in_features: (rows per program, super-blocks per step, warps)
    ("Q4_K", 2048): [(4, 8, 1), (2, 8, 1), (8, 8, 1), (4, 4, 1), (8, 4, 1)],
    ("Q4_K", 768): [(4, 4, 1), (2, 4, 1), (8, 4, 1), (16, 4, 1), (8, 2, 1)],
    ("Q6_K", 768): [(4, 4, 1), (4, 2, 1), (8, 2, 1), (2, 4, 1), (4, 1, 1)]}


def graph_time_us(step, num_steps: int, repeats: int = 5) -> float:
    """Median us per step over `repeats` replays of a graph of num_steps calls step(i)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(2):
            step(i)  # compile and warm outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(num_steps):
            step(i)
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1000 / num_steps)
    return sorted(times)[len(times) // 2]


def routed_rows(tokens: int, num_steps: int, device) -> torch.Tensor:
    """[steps, tokens * TOP_K] slot rows: each token's experts distinct, drawn at random per step."""
    return torch.stack([torch.cat([torch.randperm(EXPERTS)[:TOP_K] for _ in range(tokens)])
                        for _ in range(num_steps)]).to(device)


def quant_cases(args, device):
    for name in args.formats:
        types = FORMATS[name]
        layout = QuantExpertFormat(HIDDEN, INTERMEDIATE, *types)
        table = torch.randint(0, 256, (EXPERTS, layout.slot_bytes), dtype=torch.uint8, device=device)
        # finite scales everywhere is not needed for timing; NaNs cost the same
        for tokens in args.tokens:
            rows = routed_rows(tokens, args.steps, device)
            x = torch.randn(tokens, HIDDEN, device=device, dtype=torch.bfloat16)
            ids = rows[0].view(tokens, TOP_K)
            weights = torch.rand(tokens, TOP_K, device=device, dtype=torch.bfloat16)
            us = graph_time_us(lambda i: layout.run_rows(x, table, rows[i], ids, weights), args.steps)
            read = tokens * TOP_K * layout.slot_bytes
            yield {"case": "run_rows", "format": name, "tokens": tokens, "us_per_layer_step": round(us, 2),
                   "GB_per_s": round(read / us / 1e3, 1), "slot_bytes": layout.slot_bytes,
                   "us_per_token_48_layers": round(48 * us / tokens, 1)}
            yield from config_cases(name, layout, table, rows, x, tokens, args.steps)


def config_cases(name, layout, table, rows, x, tokens, num_steps):
    """The byte kernel at its default split beside the word and wide kernels' splits, per matrix."""
    gate_up = torch.randn(tokens * TOP_K, 2 * INTERMEDIATE, device=x.device, dtype=x.dtype)
    h = gate_up[:, :INTERMEDIATE].contiguous()
    weights = torch.rand(tokens * TOP_K, device=x.device, dtype=x.dtype)
    old = [("gate_up", layout.gate_up, x, False, TOP_K),
           ("down, silu * up on its input", layout.down, gate_up, True, 1)]
    for matrix, spec, inputs, glu, x_div in old:
        us = graph_time_us(lambda i: gathered_gemv_triton(inputs, table, rows[i], spec, glu, x_div), num_steps)
        yield gemv_row("gemv", name, matrix, spec, tokens, (16, 1, 4), us)
    word = [("gate_up, silu * up epilogue", layout.gate_up, x, True, TOP_K, None),
            ("down, weight epilogue", layout.down, h, False, 1, weights)]
    for matrix, spec, inputs, swiglu, x_div, scale in word:
        for split in WORD_CONFIGS[spec.qtype.name]:
            us = graph_time_us(lambda i: word_gemv_triton(inputs, table, rows[i], spec, x_div, swiglu, scale, split),
                               num_steps)
            yield gemv_row("word_gemv", name, matrix, spec, tokens, split, us)
        for split in WIDE_CONFIGS.get((spec.qtype.name, spec.in_features), []):
            try:
                us = graph_time_us(lambda i: wide_gemv_triton(inputs, table, rows[i], spec, x_div, swiglu, scale,
                                                              split), num_steps)
            except Exception as error:  # a split this Triton cannot compile: say so, measure the others
                yield {"case": "wide_gemv", "format": name, "matrix": matrix, "split": split,
                       "error": repr(error)[:300]}
                continue
            yield gemv_row("wide_gemv", name, matrix, spec, tokens, split, us)


def gemv_row(case, name, matrix, spec, tokens, split, us):
    return {"case": case, "format": name, "matrix": matrix, "type": spec.qtype.name, "tokens": tokens,
            "rows_per_program": split[0], "supers": split[1], "warps": split[2], "us": round(us, 2),
            "GB_per_s": round(tokens * TOP_K * spec.nbytes / us / 1e3, 1)}


def bf16_cases(args, device):
    numel = 3 * HIDDEN * INTERMEDIATE
    table = torch.randn(EXPERTS, numel, device=device, dtype=torch.bfloat16)
    for tokens in args.tokens:
        rows = routed_rows(tokens, args.steps, device)
        x = torch.randn(tokens, HIDDEN, device=device, dtype=torch.bfloat16)
        ids = rows[0].view(tokens, TOP_K)
        weights = torch.rand(tokens, TOP_K, device=device, dtype=torch.bfloat16)
        us = graph_time_us(lambda i: combine(gathered_experts(x, table[rows[i]], weights, HIDDEN, INTERMEDIATE), ids),
                           args.steps)
        yield {"case": "bf16 gathered_experts", "tokens": tokens, "us_per_layer_step": round(us, 2),
               "GB_per_s": round(tokens * TOP_K * numel * 2 / us / 1e3, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--tokens", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--formats", nargs="+", default=list(FORMATS), choices=list(FORMATS))
    parser.add_argument("--no-bf16", dest="bf16", action="store_false", help="skip the bf16 baseline")
    args = parser.parse_args()
    device = torch.device("cuda")
    print(json.dumps({"device": torch.cuda.get_device_name(device), "torch": torch.__version__}))
    best, other = {}, {}  # "type:in_features" -> (us, split) of the fastest wide split, us of the fastest other kernel
    cases = itertools.chain(quant_cases(args, device), bf16_cases(args, device) if args.bf16 else [])
    for row in cases:
        print(json.dumps(row), flush=True)
        if row["case"] in ("gemv", "word_gemv", "wide_gemv") and "us" in row and row["tokens"] == 1:
            key = f"{row['type']}:{2048 if row['matrix'].startswith('gate_up') else 768}"
            if row["case"] == "wide_gemv":
                split = (row["rows_per_program"], row["supers"], row["warps"])
                best[key] = min(best.get(key, (row["us"], split)), (row["us"], split))
            else:
                other[key] = min(other.get(key, row["us"]), row["us"])
    # the fastest splits, as engine.quant.linear.WIDE_SPLITS would hold them, for an end-to-end run to use; "none"
    # where another kernel was faster
    splits = {key: ",".join(map(str, split)) if us <= other.get(key, us) else "none"
              for key, (us, split) in best.items()}
    print(json.dumps({"wide_splits": ";".join(f"{key}={split}" for key, split in sorted(splits.items()))}))


if __name__ == "__main__":
    main()
