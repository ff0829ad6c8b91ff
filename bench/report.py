"""Turn `wisp bench` JSONs into one markdown file (a section per JSON: the arm table, the split check) and PNG
plots per JSON (tok/s vs budget, hit rate vs slots, measured vs floor), named after the JSON's stem.

    python -m bench.report bench/results/DIR/qwen3-30b-a3b-b1-p512.json [more.json ...] [--out DIR]

Floors (docs/design.md), both from the all-resident row of the same JSON (no resident row: '-'):
  run floor  = the run's H2D bytes / pinned copy-loop rate + the resident time for as many tokens;
  decode floor = the decode's H2D bytes (after every prefill) / copy-loop rate + the resident decode time;
  TTFT floor = every expert that lives on the host crosses the link once / copy-loop rate + the resident TTFT.
GPU ms/step: the arm's last decode step's CUDA graphs replayed alone (engine.bench.graph_timing.step_gpu_ms;
'-' on the CPU, or where the step did not run as whole-step graphs): what of the step is the GPU's.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def completed(result: dict) -> list[dict]:
    return [r for r in result["rows"] if "error" not in r]


def resident_of(rows: list[dict]) -> dict | None:
    return next((r for r in rows if r["arm"] == "resident"), None)


def num_tokens(row: dict) -> int:
    return len(row["tokens"][0]) if "tokens" in row else row["num_tokens"]


def decode_s(row: dict, tokens: int) -> float:
    """decode_tok_s counts the tokens of every sequence of the batch; this is the wall time of one run's decode."""
    return row["batch"] * (tokens - 1) / row["decode_tok_s"]


def measured_s(row: dict) -> float:
    return row["ttft_s"] + decode_s(row, num_tokens(row))


def floor_s(row: dict, resident: dict, copy_gb_s: float) -> float:
    """A run's floor: its bytes over the measured pinned copy rate plus the all-resident compute time."""
    return row["h2d_bytes"] / (copy_gb_s * 1e9) + resident["ttft_s"] + decode_s(resident, num_tokens(row))


def decode_floor_s(row: dict, resident: dict, copy_gb_s: float) -> float | None:
    """The decode's floor: the bytes copied after every prefill over the pinned copy rate plus the all-resident
    decode time for as many tokens; None for rows from before the suite recorded decode_h2d_bytes."""
    if "decode_h2d_bytes" not in row:
        return None
    return row["decode_h2d_bytes"] / (copy_gb_s * 1e9) + decode_s(resident, num_tokens(row))


def is_static(row: dict) -> bool:
    return row.get("mode", "static" if row["arm"].startswith("static") else "") == "static"


def is_paged(row: dict) -> bool:
    return row.get("mode", "paged" if row["arm"].startswith(("wisp", "paged")) else "") == "paged"


def ttft_floor_s(row: dict, resident: dict | None, facts: dict) -> float | None:
    """Every host expert once over the link + the resident TTFT; None where nothing lives on the host, without a
    resident row of the same prompt, or for JSONs from before the facts carried the expert counts."""
    if resident is None or row["budget_gib"] is None or "num_experts" not in facts:
        return None
    if (resident["prompt"], resident["batch"]) != (row["prompt"], row["batch"]):
        return None
    host_layers = row["offloaded_layers"] if is_static(row) else facts["num_moe_layers"]
    host_bytes = host_layers * facts["num_experts"] * facts["expert_bytes"]
    return host_bytes / (facts["copy_loop_gb_s"] * 1e9) + resident["ttft_s"]


def kernel_rates(facts: dict) -> str:
    """The pager's zero-copy miss kernel (8 experts per launch), by programs per expert."""
    rates = facts.get("copy_kernel_gb_s") or {}
    if not rates or "error" in rates:
        return f"; zero-copy miss kernel failed: {rates['error']}" if rates else ""
    listed = ", ".join(f"{rate:.1f} at split {split}" for split, rate in rates.items())
    return f"; zero-copy miss kernel {listed} GB/s"


def hit_rate(row: dict) -> float:
    uses = row["hits"] + row["misses"]
    return row["hits"] / uses if uses else 1.0


def miss_gb_s(row: dict) -> float | None:
    """Achieved H2D rate of the pager's timed (DMA) miss copies; copies inside CUDA graphs are not timed (their
    kernel's rate is in the facts). None where no copy was timed, e.g. static offload."""
    return row.get("timed_bytes", row["h2d_bytes"]) / row["copy_s"] / 1e9 if row.get("copy_s") else None


def same_as_resident(row: dict, resident: dict | None) -> str:
    """Do the row's first-run token ids and logprobs equal the resident row's, bit for bit (over the tokens both
    generated)? 'yes', 'no (token i)', or '-' (no resident row of the same session, or no logprobs recorded)."""
    if resident is None or row is resident or "logprobs" not in row or "logprobs" not in resident:
        return "-"
    for seq, (ids, ref_ids, lps, ref_lps) in enumerate(zip(row["tokens"], resident["tokens"], row["logprobs"],
                                                           resident["logprobs"])):
        for i, pair in enumerate(zip(zip(ids, lps), zip(ref_ids, ref_lps))):
            if pair[0] != pair[1]:
                return f"no (seq {seq}, token {i})" if len(row["tokens"]) > 1 else f"no (token {i})"
    return "yes"


def cell(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def ratio(numerator, denominator) -> float | None:
    return numerator / denominator if numerator is not None and denominator else None


def caption(facts: dict, rows: list[dict]) -> str:
    first = rows[0] if rows else {"batch": "-", "prompt": "-"}
    commit = facts.get("git_commit") or "unknown"
    label = f", label: {facts['label']}" if facts.get("label") else ""
    weights = (f"the weights of {facts['gguf']}" if facts.get("gguf") else "synthetic weights")
    return (f"Trace-driven ({facts['trace']}), {facts['shape']} shape ({facts['layers']} layers, {weights}), "
            f"{facts['gpu']}, torch {facts['torch']}, commit {commit}{label}, batch {first['batch']}, prompt "
            f"{first['prompt']} tokens, pinned copy loop {facts['copy_loop_gb_s']:.1f} GB/s at one-expert copies"
            + kernel_rates(facts) + ".")


def arm_table(result: dict) -> list[str]:
    facts, rows = result["facts"], completed(result)
    resident = resident_of(rows)
    has_share = any(r.get("expert_share") is not None for r in rows)
    static = {r["budget_gib"]: r for r in rows if r["arm"] == "static-uva"}
    copy = {r["budget_gib"]: r for r in rows if r["arm"] == "static-copy"}
    share_head, share_rule = ("expert share | ", "---|") if has_share else ("", "")
    lines = [f"| arm | budget GiB | {share_head}slots/layer (min) | decode tok/s (median of runs) | GPU ms/step | "
             "TTFT s | prefill tok/s | TTFT / floor | expert hit rate | H2D GB/run | miss H2D GB/s | run / floor | decode / floor | "
             "x static-UVA | x static-copy | peak GiB | = resident |",
             f"|---|---|{share_rule}---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        budget = row["budget_gib"]
        over_floor = ratio(measured_s(row), resident and floor_s(row, resident, facts["copy_loop_gb_s"]))
        over_decode = ratio(decode_s(row, num_tokens(row)),
                            resident and decode_floor_s(row, resident, facts["copy_loop_gb_s"]))
        over_ttft = ratio(row["ttft_s"], ttft_floor_s(row, resident, facts))
        uva = ratio(row["decode_tok_s"], static[budget]["decode_tok_s"] if budget in static else None)
        copies = ratio(row["decode_tok_s"], copy[budget]["decode_tok_s"] if budget in copy else None)
        share = f"{cell(row.get('expert_share'), '.2f')} | " if has_share else ""
        lines.append(
            f"| {row['arm']} | {budget if budget else '-'} | {share}{row['slots_per_layer_min']} | "
            f"{row['decode_tok_s']:.1f} | {cell(row.get('step_gpu_ms'), '.2f')} | {row.get('ttft_s_median', row['ttft_s']):.2f} | "
            f"{cell(row.get('prefill_tok_s'), '.0f')} | {cell(over_ttft, '.2f')} | {hit_rate(row):.3f} | "
            f"{row['h2d_bytes'] / 1e9:.1f} | {cell(miss_gb_s(row), '.1f')} | {cell(over_floor, '.2f')} | "
            f"{cell(over_decode, '.2f')} | {cell(uva, '.2f')} | {cell(copies, '.1f')} | "
            f"{cell(row['peak_gib'], '.2f')} | {same_as_resident(row, resident)} |")
    return lines


def split_check(rows: list[dict]) -> list[str]:
    """Per budget: the configured split (wisp) against the best measured uniform cap (wisp-sweep) and 50/50."""
    sweep = [r for r in rows if r["arm"] == "wisp-sweep"]
    if not sweep:
        return []
    by_arm = {(r["arm"], r["budget_gib"]): r for r in rows if r["arm"] in ("wisp", "wisp-50-50")}
    lines = ["### Split check", "",
             "Configured = arm wisp (MV-WSA per-layer split); sweep = one slot cap per layer at several expert "
             "shares of the pool (budget - dense - workspace), the rest to KV.", "",
             "| budget GiB | configured tok/s | configured share | best sweep tok/s | best share | 50-50 tok/s | "
             "configured / best | configured / 50-50 | sweep (share: tok/s) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for budget in sorted({r["budget_gib"] for r in sweep}):
        points = sorted((r for r in sweep if r["budget_gib"] == budget), key=lambda r: r["expert_share"])
        best = max(points, key=lambda r: r["decode_tok_s"])
        wisp, fifty = by_arm.get(("wisp", budget)), by_arm.get(("wisp-50-50", budget))
        wisp_tok_s, fifty_tok_s = (r["decode_tok_s"] if r else None for r in (wisp, fifty))
        listing = ", ".join(f"{r['expert_share']:.2f}: {r['decode_tok_s']:.1f}" for r in points)
        lines.append(
            f"| {budget} | {cell(wisp_tok_s, '.1f')} | {cell(wisp and wisp.get('expert_share'), '.2f')} | "
            f"{best['decode_tok_s']:.1f} | {best['expert_share']:.2f} | {cell(fifty_tok_s, '.1f')} | "
            f"{cell(ratio(wisp_tok_s, best['decode_tok_s']), '.2f')} | {cell(ratio(wisp_tok_s, fifty_tok_s), '.2f')} | "
            f"{listing} |")
    runs = sorted({len(r["decode_tok_s_runs"]) for r in sweep})
    return lines + ["", f"Sweep points: median of {'/'.join(map(str, runs))} runs."]


def image_table(facts: dict, rows: list[dict]) -> list[str]:
    """`wisp bench --image` rows: an image + text prompt's TTFT and the vision tower's part of it."""
    rows = [r for r in rows if "image_tokens" in r]
    if not rows:
        return []
    first = rows[0]
    lines = ["### Image prompts", "",
             f"Each request: one {first['image']} random-pixel PNG ({first['image_tokens']} image tokens) + "
             f"{first['prompt']} text tokens; the {facts['tower']} tower with random weights, planned as "
             f"{facts['tower_gib']:.2f} GiB of weights + {facts['tower_workspace_gib']:.2f} GiB for the largest "
             "image's activations. TTFT runs from the request's admission, after its image was decoded and preprocessed "
             "(preprocess s); tower s: the pixels to the device and the tower (its share: of TTFT). Medians of the "
             "runs.",
             "", "| arm | budget GiB | slots/layer (min) | prompt tokens | TTFT s | tower s | tower share | "
             "preprocess s | prefill tok/s | decode tok/s | decode path | peak GiB |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        budget = row["budget_gib"]
        lines.append(
            f"| {row['arm']} | {f'{budget:g}' if budget else '-'} | {row['slots_per_layer_min']} | "
            f"{row['prompt_tokens_total']} | {row['ttft_s_median']:.3f} | {row['tower_s_median']:.3f} | "
            f"{row['tower_share']:.3f} | {row['preprocess_s_median']:.3f} | {row['prefill_tok_s']:.0f} | "
            f"{row['decode_tok_s']:.1f} | {row['decode_path']} | {cell(row['peak_gib'], '.2f')} |")
    return lines


def table(result: dict) -> str:
    """The arm table, the image table (--image rows), the split check (when the JSON has wisp-sweep rows) and the
    failed arms of one JSON."""
    facts, rows = result["facts"], completed(result)
    lines = [caption(facts, rows), ""]
    if resident_of(rows) is None:
        lines += ["No resident row: the floor columns are '-'.", ""]
    lines += arm_table(result)
    for section in (image_table(facts, rows), split_check(rows)):
        if section:
            lines += [""] + section
    errors = [r for r in result["rows"] if "error" in r]
    lines += [f"\nFailed arm: {r['arm']} at {r['budget_gib']} GiB: {r['error']}" for r in errors]
    return "\n".join(lines) + "\n"


def plot_tok_s(result: dict, plt, path: Path) -> None:
    rows = completed(result)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for arm in ("wisp", "wisp+prefetch", "wisp-online", "wisp-50-50", "wisp-uniform", "static-uva", "static-copy"):
        points = sorted((r["budget_gib"], r["decode_tok_s"]) for r in rows if r["arm"] == arm)
        if points:
            ax.plot(*zip(*points), marker="o", label=arm)
    best = {}
    for r in rows:
        if r["arm"] == "wisp-sweep":
            best[r["budget_gib"]] = max(best.get(r["budget_gib"], 0.0), r["decode_tok_s"])
    if best:
        ax.plot(*zip(*sorted(best.items())), marker="x", linestyle=":", label="wisp-sweep (best share)")
    resident = resident_of(rows)
    if resident is not None:
        ax.axhline(resident["decode_tok_s"], color="gray", linestyle="--",
                   label=f"resident ({cell(resident['peak_gib'], '.0f')} GiB, no budget)")
    ax.set_xlabel("device budget (GiB)")
    ax.set_ylabel(f"decode tok/s (batch {rows[0]['batch']})" if rows else "decode tok/s")
    finish(fig, ax, plt, path, result)


def plot_hit_rate(result: dict, plt, path: Path) -> None:
    rows = [r for r in completed(result) if is_paged(r)]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for arm in sorted({r["arm"] for r in rows}):
        points = sorted((r["slots_per_layer_min"], hit_rate(r)) for r in rows if r["arm"] == arm)
        ax.plot(*zip(*points), marker="o", linestyle=":" if arm == "wisp-sweep" else "", label=arm)
    ax.set_xlabel("expert slots per layer (min)")
    ax.set_ylabel("expert hit rate")
    finish(fig, ax, plt, path, result)


def plot_floor(result: dict, plt, path: Path) -> None:
    """Measured run time against its floor; on the y = x line a run is as fast as its bytes allow."""
    rows, facts = completed(result), result["facts"]
    resident = resident_of(rows)
    fig, ax = plt.subplots(figsize=(7, 4.2))
    if resident is not None:
        for arm in dict.fromkeys(r["arm"] for r in rows):
            arm_rows = [r for r in rows if r["arm"] == arm]
            floors = [floor_s(r, resident, facts["copy_loop_gb_s"]) for r in arm_rows]
            ax.scatter(floors, [measured_s(r) for r in arm_rows], label=arm)
            for r, floor in zip(arm_rows, floors):
                ax.annotate(f"{r['budget_gib']:g}" if r["budget_gib"] else "-", (floor, measured_s(r)), fontsize=7)
        ax.axline((0, 0), slope=1, color="gray", linestyle="--", label="measured = floor")
    else:
        ax.text(0.5, 0.5, "no resident row: no floor", ha="center", transform=ax.transAxes)
    ax.set_xlabel("floor of the run (s): H2D bytes / copy rate + resident compute")
    ax.set_ylabel("measured run time (s): TTFT + decode")
    finish(fig, ax, plt, path, result)


def finish(fig, ax, plt, path: Path, result: dict) -> None:
    facts = result["facts"]
    ax.set_title(f"{facts['shape']}, trace-driven ({facts['trace']}), {facts['gpu']}", fontsize=9)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


PLOTS = {"tok_s_vs_budget": plot_tok_s, "hit_rate_vs_slots": plot_hit_rate, "measured_vs_floor": plot_floor}


def plot(result: dict, out: Path, prefix: str) -> list[Path]:
    """Write every plot as OUT/PREFIX-NAME.png; returns the paths (none without matplotlib)."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no plots (pip install matplotlib)")
        return []

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for name, draw in PLOTS.items():
        paths.append(out / f"{prefix}-{name}.png")
        draw(result, plt, paths[-1])
    return paths


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.report")
    parser.add_argument("results", type=Path, nargs="+", help="JSONs written by wisp bench")
    parser.add_argument("--out", type=Path, default=None, help="folder for results.md and plots (default: the "
                                                                "first JSON's folder)")
    args = parser.parse_args(argv)
    out = args.out or args.results[0].parent
    out.mkdir(parents=True, exist_ok=True)
    sections = []
    for path in args.results:
        result = json.loads(path.read_text())
        sections.append(f"## {path.stem}\n\n{table(result)}")
        plot(result, out, path.stem)
    markdown = "\n".join(sections)
    (out / "results.md").write_text(markdown)
    print(markdown)


if __name__ == "__main__":
    main()
