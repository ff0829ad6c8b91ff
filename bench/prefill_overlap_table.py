"""The prefill-overlap A/B in two short tables, from what `bench/prefill_overlap_h200.sh OUT` wrote:

    python -m bench.prefill_overlap_table OUT

1. `wisp bench` rows (OUT/profile/suite-overlapV/*.json): TTFT (median of runs) beside the prompt's expert copies
   (bytes and the copy stream's busy time: the copy floor), decode tok/s and hit rate after the prompt, peak device
   memory against the plan, and whether tokens and logprobs equal the resident row's of the same prompt;
2. the WiSP prompt step alone, overlap values interleaved in one engine (OUT/profile/profile.json)."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def suite_rows(folder: Path) -> list[dict]:
    rows = []
    for path in sorted(folder.glob("suite*/*.json")):
        overlap = path.parent.name.removeprefix("suite-overlap") if "overlap" in path.parent.name else "-"
        for row in json.loads(path.read_text())["rows"]:
            rows.append({**row, "overlap": overlap if row["arm"] != "resident" else "-"})
    return rows


def fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def suite_table(rows: list[dict]) -> list[str]:
    resident = {r["prompt"]: r for r in rows if r["arm"] == "resident"}
    lines = ["| arm | overlap | prompt | TTFT s (runs) | prompt copies GB | copy s | decode tok/s | decode hits | "
             "peak / plan GiB | = resident |", "|" + "---|" * 10]
    for r in sorted(rows, key=lambda r: (r["prompt"], r["arm"] != "resident", r["overlap"])):
        runs = ", ".join(f"{t:.3f}" for t in r.get("ttft_s_runs", []))
        hits, misses = r.get("decode_hits"), r.get("decode_misses")
        rate = f"{hits / (hits + misses):.3f}" if hits is not None and hits + misses else "-"
        ref = resident.get(r["prompt"])
        same = "-" if ref is None or ref is r else str(ref["tokens"] == r["tokens"]
                                                       and ref["logprobs"] == r["logprobs"])
        budget = f" {r['budget_gib']:g} GiB" if r.get("budget_gib") else ""
        timed = r.get("timed_bytes")
        lines.append(f"| {r['arm']}{budget} | {r['overlap']} | {r['prompt']} | {fmt(r.get('ttft_s_median'), '.3f')} "
                     f"({runs}) | {fmt(timed / 1e9 if timed else None, '.2f')} | {fmt(r.get('copy_s'), '.3f')} | "
                     f"{fmt(r.get('decode_tok_s'), '.1f')} | {rate} | {fmt(r.get('peak_gib'), '.2f')} / "
                     f"{fmt(r.get('plan_gib'), '.2f')} | {same} |")
    return lines


def step_table(profile: list[dict]) -> list[str]:
    lines = ["| arm | prompt | overlap | ring rows | step s (median; runs) | copies GB | copy s | staged / used |",
             "|" + "---|" * 8]
    for r in profile:
        if r.get("what") != "wisp prompt step":
            continue
        runs = ", ".join(f"{x['step_s']:.3f}" for x in r["runs"])
        lines.append(f"| {r['arm']} | {r['prompt']} | {r['overlap']} | {r['ring_rows']} | {r['step_s']:.3f}; {runs} | "
                     f"{r['h2d_gb']:.2f} | {r['copy_s']:.3f} | {r['staged']} / {r['staged_used']} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    out = Path((argv or sys.argv[1:])[0])
    folder = out / "profile"
    print("wisp bench rows (TTFT: median of runs; copy s: the copy stream's busy time for the prompt, its floor)")
    print("\n".join(suite_table(suite_rows(folder))))
    path = folder / "profile.json"
    profile = json.loads(path.read_text()) if path.exists() else []
    print("\nthe WiSP prompt step alone, overlap values interleaved in one engine")
    print("\n".join(step_table(profile)))
    skipped = [r for r in profile if "skipped" in r]
    if skipped:
        print("\nskipped:", "; ".join(f"{r.get('prompt')} overlap {r.get('overlap')}: {r['skipped']}" for r in skipped))


if __name__ == "__main__":
    main()
