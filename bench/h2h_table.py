"""The head-to-head table of one file from bench/h2h_h200.sh's outputs: each `wisp bench` row (budget, link) beside
llama.cpp's --n-cpu-moe run at the same budget (resident beside the whole file on the GPU), with every thread count
llama.cpp ran:

    python bench/h2h_table.py --llama DIR/llama_cpp.json WISP_JSON...   # prints a Markdown table

TTFT: Wisp's median time to the first token of a PROMPT-token prompt; llama.cpp's is PROMPT / its pp tok/s
(llama-bench's prompt test, which is the prefill alone). Ratios are Wisp over llama.cpp for decode and llama.cpp
over Wisp for TTFT (above 1: Wisp ahead). A Wisp arm marked "late graph" decoded through a CUDA graph captured after
its process's first three, which replays slower (engine.bench.graph_timing.is_late_graph): compare it with late rows."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from engine.bench.graph_timing import is_late_graph

LATE_NOTE = ("late graph: decoded through a CUDA graph captured after its process's first three, which replays "
             "slower whatever the arm; compare it with other late rows")


def wisp_rows(paths: list[Path]) -> list[dict]:
    """Every row of the given `wisp bench` JSON files, with the file's link (None: the machine's own)."""
    rows = []
    for path in paths:
        result = json.loads(path.read_text())
        for row in result["rows"]:
            if "error" not in row and row.get("decode_tok_s"):
                rows.append({**row, "link_gbps": result["facts"].get("link_gbps")})
    return rows


def llama_run(llama: dict, budget_gib: float | None) -> dict | None:
    """llama.cpp's run at this budget (None: the whole file on the GPU, --n-cpu-moe 0)."""
    n = 0 if budget_gib is None else next((b["n_cpu_moe"] for b in llama["budgets"]
                                           if b["budget_gib"] == budget_gib), None)
    return next((row for row in llama["rows"] if row["n_cpu_moe"] == n), None)


def table(rows: list[dict], llama: dict) -> str:
    threads = [t.strip() for t in str(llama["threads"]).split(",")]
    prompt = llama["prompt"]
    head = ["budget GiB", "link GB/s", "Wisp arm", "Wisp decode tok/s", "Wisp TTFT s"]
    for t in threads:
        head += [f"llama.cpp -t {t} tg tok/s (N)", f"decode ratio -t {t}", f"llama.cpp -t {t} TTFT s",
                 f"TTFT ratio -t {t}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    order = sorted(rows, key=lambda r: (r["budget_gib"] or 1e9, r["link_gbps"] or 1e9, r["prompt"], r["arm"]))
    for row in order:
        budget = row["budget_gib"]
        ttft = row.get("ttft_s_median") or row["ttft_s"]
        cells = ["resident" if budget is None else f"{budget:g}", f"{row['link_gbps']:g}" if row["link_gbps"] else "native",
                 row["arm"] + (f" p{row['prompt']}" if row["prompt"] != prompt else "")
                 + (" (late graph)" if is_late_graph(row) else ""),
                 f"{row['decode_tok_s']:.1f}", f"{ttft:.3f}"]
        run = llama_run(llama, budget) if row["prompt"] == prompt else None
        for t in threads:
            speed = run and (run.get("by_threads", {}).get(t) or (run if len(threads) == 1 else None))
            if not speed or "tg_tok_s" not in speed:
                cells += ["-", "-", "-", "-"]
                continue
            llama_ttft = prompt / speed["pp_tok_s"]
            cells += [f"{speed['tg_tok_s']:.1f} ({run['n_cpu_moe']})", f"{row['decode_tok_s'] / speed['tg_tok_s']:.2f}x",
                      f"{llama_ttft:.3f}", f"{llama_ttft / ttft:.2f}x"]
        lines.append("| " + " | ".join(cells) + " |")
    if any(is_late_graph(row) for row in rows):
        lines += ["", LATE_NOTE]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llama", type=Path, required=True, help="llama_cpp.json of bench/llama_cpp_bench.py")
    parser.add_argument("wisp", type=Path, nargs="+", help="`wisp bench` result JSON files of the same file")
    args = parser.parse_args(argv)
    print(table(wisp_rows(args.wisp), json.loads(args.llama.read_text())), end="")


if __name__ == "__main__":
    main()
