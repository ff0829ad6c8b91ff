"""Turn a `wisp bench` JSON into a markdown table and PNG plots (tok/s vs budget per arm; measured vs floor).

    python -m engine.bench.report bench/results/DIR/qwen3-30b-a3b-b1-p512.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def floor_s(row: dict, resident: dict, copy_gb_s: float, tokens: int) -> float:
    """A run's floor: its bytes over the measured pinned copy rate plus the all-resident compute time."""
    compute = resident["ttft_s"] + (tokens - 1) / resident["decode_tok_s"]
    return row["h2d_bytes"] / (copy_gb_s * 1e9) + compute


def measured_s(row: dict, tokens: int) -> float:
    return row["ttft_s"] + (tokens - 1) / row["decode_tok_s"]


def table(result: dict) -> str:
    facts, rows = result["facts"], [r for r in result["rows"] if "error" not in r]
    resident = next(r for r in rows if r["arm"] == "resident")
    tokens = len(resident["tokens"][0])
    static = {(r["budget_gib"]): r for r in rows if r["arm"] == "static-uva"}
    copy = {(r["budget_gib"]): r for r in rows if r["arm"] == "static-copy"}
    lines = [f"Trace-driven ({facts['trace']}), {facts['shape']} shape ({facts['layers']} layers, synthetic bf16 weights), "
             f"{facts['gpu']}, torch {facts['torch']}, batch {resident['batch']}, prompt {resident['prompt']} tokens, "
             f"pinned copy loop {facts['copy_loop_gb_s']:.1f} GB/s at one-expert copies.",
             "",
             "| arm | budget GiB | slots/layer (min) | decode tok/s (median of runs) | TTFT s | expert hit rate | "
             "H2D GB/run | run / floor | x static-UVA | x static-copy | peak GiB |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        uses = row["hits"] + row["misses"]
        budget = row["budget_gib"]
        ratio_uva = row["decode_tok_s"] / static[budget]["decode_tok_s"] if budget in static else None
        ratio_copy = row["decode_tok_s"] / copy[budget]["decode_tok_s"] if budget in copy else None
        over_floor = measured_s(row, tokens) / floor_s(row, resident, facts["copy_loop_gb_s"], tokens)
        peak = "-" if row["peak_gib"] is None else f"{row['peak_gib']:.2f}"
        lines.append(
            f"| {row['arm']} | {budget if budget else '-'} | {row['slots_per_layer_min']} | {row['decode_tok_s']:.1f} | "
            f"{row['ttft_s']:.2f} | {row['hits'] / uses if uses else 1:.3f} | {row['h2d_bytes'] / 1e9:.1f} | "
            f"{over_floor:.2f} | {f'{ratio_uva:.2f}' if ratio_uva else '-'} | {f'{ratio_copy:.1f}' if ratio_copy else '-'} | "
            f"{peak} |")
    errors = [r for r in result["rows"] if "error" in r]
    lines += [f"\nFailed arm: {r['arm']} at {r['budget_gib']} GiB: {r['error']}" for r in errors]
    return "\n".join(lines) + "\n"


def plot(result: dict, out: Path) -> None:
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no plot (pip install matplotlib)")
        return

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in result["rows"] if "error" not in r]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for arm in ("wisp", "wisp+prefetch", "static-uva", "static-copy"):
        points = sorted((r["budget_gib"], r["decode_tok_s"]) for r in rows if r["arm"] == arm)
        if points:
            ax.plot(*zip(*points), marker="o", label=arm)
    resident = next(r for r in rows if r["arm"] == "resident")
    ax.axhline(resident["decode_tok_s"], color="gray", linestyle="--", label="resident (57 GiB, no budget)")
    ax.set_xlabel("device budget (GiB)")
    ax.set_ylabel("decode tok/s (batch 1)")
    ax.set_title(f"{result['facts']['shape']}, trace-driven ({result['facts']['trace']}), {result['facts']['gpu']}")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "tok_s_vs_budget.png", dpi=110)


def main(argv: list[str] | None = None) -> None:
    path = Path((argv or sys.argv[1:])[0])
    result = json.loads(path.read_text())
    (path.parent / "results.md").write_text(table(result))
    plot(result, path.parent)
    print(table(result))


if __name__ == "__main__":
    main()
