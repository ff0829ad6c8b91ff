"""Time engine.quant.wide_gemv's splits on a CUDA GPU at Qwen3-30B-A3B's decode matrices (batch 1): the experts'
gate_up (SwiGLU epilogue) and down (routing-weight epilogue) over 8 gathered slots, and the dense attention
projections. Each case is a CUDA graph of CALLS back-to-back calls, each on slots of its own (no call reads what
another read; L2 is flushed before each replay), as the 48 layers of a decode step run; median of 5 replays, us a
call and GB/s of quantized bytes. Every split's output is checked bit for bit against two rows a one-warp program
("base"), and, given --before (the kernel file before warps on rows), that kernel's against it too. Prints one
JSON line per row.

    python bench/gemv_warps.py [--before OLD/wide_gemv.py] [--shard I/N: compile that share of the kernels, time
    nothing]"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.quant_gemv_probe import graph_time_us  # noqa: E402
from engine.quant.linear import QuantLinearSpec, wide_gemv_triton, wide_split  # noqa: E402

# name, type, rows, in_features, entries, epilogue
MATRICES = [("gate_up Q4_K", "Q4_K", 1536, 2048, 8, "swiglu"),
            ("down Q6_K", "Q6_K", 2048, 768, 8, "scale"),
            ("down Q4_K", "Q4_K", 2048, 768, 8, "scale"),
            ("q Q4_K", "Q4_K", 4096, 2048, 1, None),
            ("k Q4_K", "Q4_K", 512, 2048, 1, None),
            ("v Q6_K", "Q6_K", 512, 2048, 1, None),
            ("o Q4_K", "Q4_K", 2048, 4096, 1, None)]
CALLS = 48
STEP_MATRICES = ("gate_up Q4_K", "down Q6_K", "q Q4_K", "k Q4_K", "v Q6_K", "o Q4_K")  # a Q4_K_M layer's launches
WARPS, ROWS_PER_WARP = (2, 4, 8), (1, 2)
# a persistent grid's warps an SM: at 88-96 registers a thread an SM holds 21-23 warps at once, so every program
# of these grids is resident from the start
WARPS_PER_SM = (16, 20)
BLOCK_BYTES = {"Q4_K": 144, "Q6_K": 210}


def splits(spec: QuantLinearSpec):
    """(label, split) of every variant timed for this matrix; the super-blocks a step stay the default's."""
    supers = wide_split(spec)[1]
    base = (2, supers, 1)
    yield "base", base
    if wide_split(spec) != base:
        yield "default", wide_split(spec)
    yield "W1 r4", (4, supers, 1)  # one warp's rows alone: whether a row's bits ever depended on BN
    for warps in WARPS:
        for per_warp in ROWS_PER_WARP:
            yield f"W{warps} r{per_warp}", (warps * per_warp, supers, warps)
    for per_sm in WARPS_PER_SM:
        yield f"base persistent{per_sm}", (2, supers, 1, per_sm)
    for warps in WARPS:
        for per_warp in ROWS_PER_WARP:
            for per_sm in sorted({target // warps for target in WARPS_PER_SM}):
                yield f"W{warps} r{per_warp} persistent{per_sm}", (warps * per_warp, supers, warps, per_sm)


def finite_table(spec: QuantLinearSpec, num_slots: int, device) -> torch.Tensor:
    """[num_slots, slot bytes] random blocks whose f16 scales are small and finite (random bits would make NaNs)."""
    slot_bytes = -(-spec.nbytes // 16) * 16
    table = torch.randint(0, 256, (num_slots, slot_bytes), dtype=torch.uint8, device=device)
    block = BLOCK_BYTES[spec.qtype.name]
    blocks = table[:, : spec.nbytes].view(num_slots, -1, block)  # [slots, blocks, block bytes]
    halves = (torch.rand(num_slots, blocks.shape[1], 2, device=device) * 0.01).half().view(torch.uint8)
    if spec.qtype.name == "Q6_K":
        blocks[..., 208:210] = halves[..., :2]  # d
    else:
        blocks[..., 0:4] = halves  # d, dmin
    return table


def matrix_inputs(spec, entries, epilogue, num_slots, device):
    """x, rows [CALLS, entries] (distinct slots), the call's keyword arguments."""
    generator = torch.Generator(device="cpu").manual_seed(0)
    slots = torch.randperm(num_slots, generator=generator)  # CALLS x entries of them, or fewer to compile only
    rows = slots.repeat(-(-CALLS * entries // num_slots))[: CALLS * entries].view(CALLS, entries).to(device)
    if epilogue == "scale":  # the down projection: one x row an entry, a routing weight an entry
        x = torch.randn(entries, spec.in_features, generator=generator).to(device, torch.bfloat16)
        kwargs = {"scale": torch.rand(entries, generator=generator).to(device, torch.bfloat16)}
    else:  # gate_up and the dense projections: one token's x for every entry
        x = torch.randn(1, spec.in_features, generator=generator).to(device, torch.bfloat16)
        kwargs = {"x_div": entries, "swiglu": epilogue == "swiglu"}
    return x, rows, kwargs


def before_gemv(module, x, table, rows, spec, x_div=1, swiglu=False, scale=None, split=None):
    """The kernel before warps on rows (its wide_gemv's signature, one warp a program)."""
    block, supers = split[:2]
    n_out = spec.out_features // 2 if swiglu else spec.out_features
    out = torch.empty(rows.numel(), n_out, dtype=x.dtype, device=x.device)
    grid = (rows.numel(), -(-n_out // (block // 2 if swiglu else block)))
    module.wide_gemv[grid](x, table, rows, out if scale is None else scale, out, table.shape[1], spec.byte_offset,
                           spec.row_bytes, n_out, spec.in_features, x.shape[-1], x_div,
                           QTYPE=module.WIDE_TYPES[spec.qtype.name], BN=block, SB=supers, SWIGLU=swiglu,
                           SCALE=scale is not None, num_warps=1)
    return out


def variants(spec, before):
    """(label, split, gemv) of every variant, the kernel before warps on rows right after base where given."""
    for label, split in splits(spec):
        yield label, split, wide_gemv_triton
        if label == "base" and before is not None:
            yield "before", split, lambda *a, **k: before_gemv(before, *a, **k)


def matrix_rows(matrix, before, device, flush, shard):
    name, qtype, n, k, entries, epilogue = matrix
    spec = QuantLinearSpec(qtype, n, k)
    num_slots = entries if shard else CALLS * entries  # compiling needs the shapes, not the bytes
    table = finite_table(spec, num_slots, device)
    x, rows, kwargs = matrix_inputs(spec, entries, epilogue, num_slots, device)
    reference = None
    for index, (label, split, gemv) in enumerate(variants(spec, before)):
        if shard and index % shard[1] != shard[0]:
            continue
        call = lambda i: gemv(x, table, rows[i], spec, split=split, **kwargs)  # noqa: E731
        try:
            out = call(0)
            if shard:
                continue
            us = graph_time_us(call, CALLS, flush=flush)
        except Exception as error:  # a split this Triton cannot compile or run: say so, measure the others
            yield {"matrix": name, "variant": label, "split": split, "error": repr(error)[:300]}
            continue
        if label == "base":
            reference = out
        same = None if reference is None else torch.equal(out.view(torch.int16), reference.view(torch.int16))
        yield {"matrix": name, "variant": label, "split": split, "us": round(us, 2),
               "GB_per_s": round(entries * spec.nbytes / us / 1e3, 1), "bits_equal_base": same}


def load_before(path: str | None):
    if path is None:
        return None
    spec = importlib.util.spec_from_file_location("wide_gemv_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def print_table(path: str) -> None:
    """The rows of a run (JSON lines) as a table a matrix, then the fastest variant with base's bits a matrix and
    whether every variant gave base's bits."""
    rows = [json.loads(line) for line in open(path) if line.startswith('{"matrix"')]
    base = {row["matrix"]: row["us"] for row in rows if row["variant"] == "base" and "us" in row}
    best, differ = {}, []
    print(f"{'matrix':13} {'variant':24} {'split':14} {'us':>7} {'GB/s':>6} {'vs base':>7}  bits")
    for row in rows:
        if "us" not in row:
            print(f"{row['matrix']:13} {row['variant']:24} {str(tuple(row['split'])):14} error {row['error'][:80]}")
            continue
        speedup = base.get(row["matrix"], row["us"]) / row["us"]
        bits = {True: "= base", False: "DIFFER", None: "-"}[row["bits_equal_base"]]
        print(f"{row['matrix']:13} {row['variant']:24} {str(tuple(row['split'])):14} {row['us']:7.2f} "
              f"{row['GB_per_s']:6.0f} {speedup:6.2f}x  {bits}")
        if row["bits_equal_base"] is False:
            differ.append(f"{row['matrix']}: {row['variant']}")
        elif row["variant"] != "before" and row["us"] < best.get(row["matrix"], (float("inf"),))[0]:
            best[row["matrix"]] = (row["us"], row["variant"], tuple(row["split"]), speedup)
    for matrix, (us, variant, split, speedup) in best.items():
        print(f"BEST {matrix:13} {variant:24} {str(split):14} {us:7.2f} us  {speedup:.2f}x base")
    step = [matrix for matrix in STEP_MATRICES if matrix in base and matrix in best]
    if step:  # a decode step's 48 layers, each one launch of each of these matrices
        base_us = 48 * sum(base[matrix] for matrix in step)
        best_us = 48 * sum(best[matrix][0] for matrix in step)
        print(f"STEP 48 x ({', '.join(step)}): base {base_us:.0f} us, best {best_us:.0f} us, {base_us - best_us:.0f} "
              f"us less a step")
    checked = sum(row.get("bits_equal_base") is not None for row in rows)
    print(f"BITS all {checked} checked variants equal base" if not differ else f"BITS DIFFER: {'; '.join(differ)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="the wide_gemv.py before warps on rows, to time and check beside")
    parser.add_argument("--shard", help="I/N: compile every N-th kernel from the I-th, then exit")
    parser.add_argument("--matrices", nargs="+", help="names of MATRICES to run (default all)")
    parser.add_argument("--table", help="print a run's rows (its JSON lines) as a table, and exit")
    args = parser.parse_args()
    if args.table:
        return print_table(args.table)
    shard = tuple(int(v) for v in args.shard.split("/")) if args.shard else None
    device = torch.device("cuda")
    if not shard:
        print(json.dumps({"device": torch.cuda.get_device_name(device), "torch": torch.__version__}), flush=True)
    before = load_before(args.before)
    flush = None if shard else torch.empty(256 << 20, dtype=torch.uint8, device=device)  # > the H200's 50 MB L2
    for matrix in MATRICES:
        if args.matrices and matrix[0] not in args.matrices:
            continue
        for row in matrix_rows(matrix, before, device, flush, shard):
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
