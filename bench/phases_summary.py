"""The phases bench's verdict: the online arm against the best static split, and the workload's ceiling. Also
combines the JSONs of one workload run in parts (a run of more arms than fit one 10-minute device command is
split over several with --arms and --static-kv) into one verdict.

    python -m bench.phases_summary ONLINE_PART.json STATIC_PART.json [--out MERGED.json]

The parts must be one workload (the same shape, trace, phases, cycles, budget, maximum length and GPU) whose arms
all produced the same tokens; otherwise the comparison would mean nothing, and it stops with the reason."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

WORKLOAD_FACTS = ("shape", "layers", "trace", "burst", "chat", "cycles", "max_len", "gpu")


def summary(rows: list[dict]) -> dict | None:
    """Online against the best static split, and the workload's ceiling: every phase run by the static split that
    was fastest in it, with no cost to switch (what no controller can beat by choosing among these splits)."""
    statics = [r for r in rows if r["arm"] != "online"]
    online = next((r for r in rows if r["arm"] == "online"), None)
    if not statics or online is None:
        return None
    best = min(statics, key=lambda r: r["total_s"])
    per_phase = sum(min(r["phases"][phase]["wall_s"] for r in statics) for phase in best["phases"])
    return {"online_s": online["total_s"], "best_static": best["arm"], "best_static_s": best["total_s"],
            "online_speedup": best["total_s"] / online["total_s"], "per_phase_best_s": per_phase,
            "ceiling": best["total_s"] / per_phase}


def merge(parts: list[dict]) -> dict:
    """Several parts' {"facts", "rows"} -> one, with the summary; ValueError if they are not one workload."""
    facts = parts[0]["facts"]
    for part in parts[1:]:
        differ = [key for key in WORKLOAD_FACTS if part["facts"].get(key) != facts.get(key)]
        if differ:
            raise ValueError(f"the parts ran different workloads ({', '.join(differ)} differ)")
    rows = [row for part in parts for row in part["rows"]]
    arms = [row["arm"] for row in rows]
    twice = sorted({arm for arm in arms if arms.count(arm) > 1})
    if twice:
        raise ValueError(f"arms in more than one part: {', '.join(twice)}")
    budgets = {row["budget_gib"] for row in rows}
    if len(budgets) > 1:
        raise ValueError(f"the parts ran different budgets: {', '.join(f'{b:g} GiB' for b in sorted(budgets))}")
    odd = [row["arm"] for row in rows if row["tokens"] != rows[0]["tokens"]]
    if odd:
        raise ValueError(f"tokens differ from {rows[0]['arm']}'s in: {', '.join(odd)}")
    return {"facts": facts, "rows": rows, "summary": summary(rows), "parts": len(parts)}


def verdict(result: dict) -> str:
    """One line: online against the best static, and the ceiling (each phase at its fastest static split)."""
    return (f"online {result['online_s']:.2f} s vs best static ({result['best_static']}) "
            f"{result['best_static_s']:.2f} s: {result['online_speedup']:.2f}x; "
            f"the best static of each phase, switched for free: {result['per_phase_best_s']:.2f} s, "
            f"{result['ceiling']:.2f}x")


def report(merged: dict) -> str:
    lines = [f"{row['arm']}: {row['total_s']:.2f} s" for row in merged["rows"]]
    result = merged["summary"]
    return "\n".join(lines + [verdict(result) + "; same tokens in every arm" if result is not None
                              else "no online arm and static arm to compare"])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("parts", type=Path, nargs="+", help="phases-*.json of one workload")
    parser.add_argument("--out", type=Path, help="write the merged rows and summary here")
    args = parser.parse_args(argv)
    try:
        merged = merge([json.loads(path.read_text()) for path in args.parts])
    except (OSError, json.JSONDecodeError, KeyError) as error:
        parser.error(f"cannot read the parts: {error}")
    except ValueError as error:
        parser.error(str(error))
    print(report(merged))
    if args.out:
        args.out.write_text(json.dumps(merged))


if __name__ == "__main__":
    main()
