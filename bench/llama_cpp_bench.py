"""llama.cpp's llama-bench on a GGUF MoE file at Wisp's VRAM budgets: the routed experts of the first N layers stay
in host RAM (`--n-cpu-moe N`, computed there by the CPU), everything else on the GPU (-ngl 99).

    python bench/llama_cpp_bench.py --bench build/bin/llama-bench --model Q4_K_M.gguf --budgets 8,12,16,24 --out DIR
    ... --threads 16,8   # each N measured with 16 and with 8 CPU threads (a desktop's), one llama-bench call

The results are written after every llama-bench run, and a later call with the same file and settings keeps the
rows already in DIR: a device call that ends mid-way loses only the run it was in, and the next goes on from there.

One run with every layer's experts on the host (N = all layers) measures what llama.cpp allocates on the device
besides the experts (its model, KV and compute buffers, as its verbose log prints them); each budget then gets the
smallest N whose buffers, that base plus the expert bytes of layers N.. (read from the file), fit the budget, and
is run and checked (N + 1 if it does not fit). This is the same account as Wisp's peak (torch's allocated bytes):
neither counts the CUDA context; nvidia-smi's peak for the process is recorded beside it. Writes llama_cpp.json
and llama_cpp.md (and each run's log, its load and buffer lines) into DIR."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import threading
import time
from pathlib import Path

GiB, MiB = 2**30, 2**20
KEPT = re.compile(r"buffer size|system_info|print_info|load_tensors|ggml_cuda_init|Device \d|offload|n_ctx|error",
                  re.IGNORECASE)
BUFFER = re.compile(r"(CUDA\d+) (model|KV|compute|RS) buffer size\s*=\s*([\d.]+) MiB")


def expert_bytes_by_layer(model: Path) -> list[int]:
    """Stored bytes of each layer's routed experts (blk.L.ffn_{gate,up,down}_exps), in layer order."""
    from gguf import GGUFReader

    by_layer: dict[int, int] = {}
    for tensor in GGUFReader(model).tensors:
        match = re.match(r"blk\.(\d+)\.ffn_(gate|up|down)_exps\.weight$", tensor.name)
        if match:
            by_layer[int(match.group(1))] = by_layer.get(int(match.group(1)), 0) + int(tensor.n_bytes)
    return [by_layer[layer] for layer in sorted(by_layer)]


def device_buffers(log: str) -> dict[str, float]:
    """{kind: MiB} of llama.cpp's device buffers in a verbose log: the model buffer, and the largest KV and
    compute buffers of the contexts llama-bench made (one per test)."""
    sizes: dict[str, float] = {}
    for _, kind, mib in BUFFER.findall(log):
        sizes[kind] = max(sizes.get(kind, 0.0), float(mib))
    return sizes


def smallest_n(base_bytes: int, layer_bytes: list[int], budget: int) -> int:
    """The fewest layers whose experts stay on the host so that base + the other layers' experts fit."""
    for n in range(len(layer_bytes) + 1):
        if base_bytes + sum(layer_bytes[n:]) <= budget:
            return n
    return len(layer_bytes)


class MemoryPoll:
    """The peak of nvidia-smi's memory.used (MiB, GPU 0) while the block runs, polled every 100 ms."""

    def __init__(self):
        self.peak = None
        self.idle = self.read()

    @staticmethod
    def read() -> float | None:
        try:
            done = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits",
                                   "-i", "0"], capture_output=True, text=True, timeout=10)
            return float(done.stdout.split()[0])
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            return None

    def __enter__(self):
        self.running = True
        self.thread = threading.Thread(target=self.poll, daemon=True)
        self.thread.start()
        return self

    def poll(self):
        while self.running:
            used = self.read()
            if used is not None:
                self.peak = max(self.peak or 0.0, used)
            time.sleep(0.1)

    def __exit__(self, *exc):
        self.running = False
        self.thread.join()


def run_bench(args, n_cpu_moe: int, out: Path) -> dict:
    """One llama-bench invocation (pp and tg tests, args.reps repetitions each); its row."""
    command = [str(args.bench), "-m", str(args.model), "-ngl", "99", "-ncmoe", str(n_cpu_moe), "-t", str(args.threads),
               "-p", str(args.prompt), "-n", str(args.tokens), "-r", str(args.reps), "-fa", args.flash_attn,
               "-o", "json", "-v"]
    started = time.perf_counter()
    with MemoryPoll() as memory:
        done = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    log_path = out / f"llama_cpp-ncmoe{n_cpu_moe}.log"
    kept = [line for line in done.stderr.splitlines() if KEPT.search(line)]  # -v also logs every graph node
    log_path.write_text(" ".join(command) + "\n" + "\n".join(kept) + "\n")
    row = {"n_cpu_moe": n_cpu_moe, "command": " ".join(command), "returncode": done.returncode,
           "wall_s": time.perf_counter() - started, "buffers_mib": device_buffers(done.stderr),
           "smi_idle_mib": memory.idle, "smi_peak_mib": memory.peak}
    row["device_alloc_gib"] = sum(row["buffers_mib"].values()) * MiB / GiB
    if memory.peak is not None:
        row["smi_peak_gib"] = (memory.peak - (memory.idle or 0.0)) * MiB / GiB
    try:
        tests = json.loads(done.stdout)
    except json.JSONDecodeError:
        row["error"] = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return row
    row["by_threads"] = speeds_by_threads(tests)
    row.update(row["by_threads"][str(tests[0]["n_threads"])])  # the first thread count, as rows had before
    row["build"] = {k: tests[0].get(k) for k in ("build_commit", "build_number", "cpu_info", "gpu_info", "backends",
                                                 "n_threads", "flash_attn", "type_k", "n_batch", "n_ubatch")}
    speeds = {t: {k: round(v, 2) for k, v in speed.items() if k.endswith(("tok_s", "std"))}
              for t, speed in row["by_threads"].items()}
    print(json.dumps({"n_cpu_moe": n_cpu_moe, "device_alloc_gib": round(row["device_alloc_gib"], 3),
                      "wall_s": round(row["wall_s"], 1), "by_threads": speeds}), flush=True)
    return row


def speeds_by_threads(tests: list[dict]) -> dict[str, dict]:
    """llama-bench's JSON tests -> {threads: {pp_tok_s, pp_std, pp_samples, tg_tok_s, ...}} (JSON keys: strings)."""
    speeds: dict[str, dict] = {}
    for test in tests:
        kind = "pp" if test["n_gen"] == 0 else "tg"
        speeds.setdefault(str(test["n_threads"]), {}).update({
            f"{kind}_tok_s": test["avg_ts"], f"{kind}_std": test["stddev_ts"], f"{kind}_samples": test.get("samples_ts")})
    return speeds


def measure(args) -> dict:
    """The base run, then each budget's; llama_cpp.json and .md in args.out are rewritten after every run, and rows
    an earlier call left there with the same model and settings are kept, not run again."""
    layer_bytes = expert_bytes_by_layer(args.model)
    layers = len(layer_bytes)
    result = {"model": args.model.name, "layers": layers, "expert_bytes_by_layer": layer_bytes,
              "base_alloc_gib": None, "threads": args.threads, "prompt": args.prompt, "tokens": args.tokens,
              "reps": args.reps, "flash_attn": args.flash_attn, "budgets": [], "rows": []}
    earlier = earlier_rows(args.out / "llama_cpp.json", result)

    def row_at(n: int) -> dict:
        row = next((r for r in result["rows"] if r["n_cpu_moe"] == n), None)
        if row is None:
            row = earlier.get(n) or run_bench(args, n, args.out)
            if n in earlier:
                print(f"kept from an earlier call: --n-cpu-moe {n}", flush=True)
            result["rows"].append(row)
            write(args.out, result)
        return row

    base = int(row_at(layers)["device_alloc_gib"] * GiB)  # every layer's experts on the host: the base
    result["base_alloc_gib"] = base / GiB
    for budget_gib in (float(b) for b in args.budgets.split(",")):
        budget = int(budget_gib * GiB)
        n = smallest_n(base, layer_bytes, budget)
        if row_at(n)["device_alloc_gib"] * GiB > budget and n < layers:  # the estimate missed: one more on the host
            n += 1
            row_at(n)
        result["budgets"].append({"budget_gib": budget_gib, "n_cpu_moe": n,
                                  "predicted_gib": (base + sum(layer_bytes[n:])) / GiB})
        write(args.out, result)
    return result


def earlier_rows(path: Path, result: dict) -> dict[int, dict]:
    """{n_cpu_moe: row} of the runs without error in an earlier llama_cpp.json of the same file and settings."""
    if not path.exists():
        return {}
    earlier = json.loads(path.read_text())
    same = ("model", "expert_bytes_by_layer", "threads", "prompt", "tokens", "reps", "flash_attn")
    if any(earlier.get(key) != result[key] for key in same):
        return {}
    return {row["n_cpu_moe"]: row for row in earlier["rows"] if "error" not in row and row.get("returncode") == 0}


def write(out: Path, result: dict) -> None:
    (out / "llama_cpp.json").write_text(json.dumps(result, indent=1))
    if result["base_alloc_gib"] is not None:
        (out / "llama_cpp.md").write_text(table(result))


def table(result: dict) -> str:
    by_n = {row["n_cpu_moe"]: row for row in result["rows"]}
    threads = [str(t) for t in str(result["threads"]).split(",")]
    speed_heads = " | ".join(f"pp{result['prompt']} tok/s -t {t} | tg{result['tokens']} tok/s -t {t}" for t in threads)
    lines = [f"llama-bench on {result['model']}: -ngl 99, -t {result['threads']}, -p {result['prompt']}, "
             f"-n {result['tokens']}, {result['reps']} repetitions (mean +- std)", "",
             f"| budget GiB | --n-cpu-moe | expert layers on GPU | device buffers GiB | nvidia-smi peak GiB | {speed_heads} |",
             "|---|---|---|---|---|" + "---|---|" * len(threads)]
    rows = [("all on host", result["layers"])] + [(f"{b['budget_gib']:g}", b["n_cpu_moe"]) for b in result["budgets"]]
    for label, n in rows:
        row = by_n[n]
        peak = f"{row['smi_peak_gib']:.2f}" if row.get("smi_peak_gib") is not None else "-"
        lines.append(f"| {label} | {n} | {result['layers'] - n} | {row['device_alloc_gib']:.2f} | {peak} | "
                     f"{' | '.join(speed_cells(row, t) for t in threads)} |")
    return "\n".join(lines) + "\n"


def speed_cells(row: dict, threads: str) -> str:
    speed = row.get("by_threads", {}).get(threads) or (row if "tg_tok_s" in row else None)
    if speed is None or "tg_tok_s" not in speed:
        return f"error: {row.get('error', 'no result')} | -"
    return f"{speed['pp_tok_s']:.1f} +- {speed['pp_std']:.1f} | {speed['tg_tok_s']:.2f} +- {speed['tg_std']:.2f}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench", type=Path, required=True, help="the llama-bench executable")
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--budgets", default="8,12,16,24", help="GiB")
    parser.add_argument("--threads", default="16", help="llama-bench -t: one count, or several (16,8)")
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--flash-attn", default="off",
                        help="llama-bench -fa (on|off|auto); off: the build has no FlashAttention kernels")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per llama-bench invocation")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    print(table(measure(args)))


if __name__ == "__main__":
    main()
