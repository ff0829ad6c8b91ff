"""CPU head-to-head on the bundled demo model: Wisp's engine (safetensors, fp32 compute) vs llama.cpp through
Wisp's GGUF backend (the demo's GGUF twins: f32, bf16, f16, q8_0), same prompts, greedy, same thread count.

    python bench/llamacpp_cpu_compare.py --out bench/results/2026-11-29-cpu-llamacpp

Each arm loads once, runs one warm-up, then --runs measured requests per prompt; every run starts with a
different first line ("# sample N"), so neither engine's prefix cache serves the prompt. decode tok/s and
TTFT are the engines' own per-request stats (RequestStats), reported as medians.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import torch

from engine.api import Engine, EngineOptions, GenerateRequest, SamplingParams
from engine.gguf.convert import convert
from engine.loading.model_path import DEMO_MODEL

PROMPTS = {
    "short": "def fib(n):",
    "long": Path(json.__file__).with_name("decoder.py").read_text()[:1800],  # ~500 tokens of CPython source
}
GGUF_TYPES = ("f32", "bf16", "f16", "q8_0")


def run_arm(name: str, options: EngineOptions, runs: int, max_tokens: int) -> dict:
    started = time.perf_counter()
    with Engine(options) as engine:
        load_s = time.perf_counter() - started
        result = {"arm": name, "load_s": load_s, "device": engine.info.device, "dtype": engine.info.dtype}
        for label, body in PROMPTS.items():
            samples = [generate(engine, f"# sample {i}\n{body}", max_tokens) for i in range(runs + 1)][1:]
            result[label] = summary(samples)
    return result


def generate(engine: Engine, prompt: str, max_tokens: int) -> dict:
    sampling = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    finish = engine.generate(GenerateRequest(prompt=prompt, sampling=sampling))
    if finish.error:
        raise RuntimeError(finish.error)
    s = finish.stats
    return {"prompt_tokens": s.prompt_tokens, "ttft_s": s.ttft_s, "decode_tok_s": s.decode_tok_s,
            "token_ids": list(finish.token_ids)}


def summary(samples: list[dict]) -> dict:
    return {
        "prompt_tokens": samples[0]["prompt_tokens"],
        "ttft_ms_median": 1000 * statistics.median(s["ttft_s"] for s in samples),
        "decode_tok_s_median": statistics.median(s["decode_tok_s"] for s in samples),
        "decode_tok_s_all": [round(s["decode_tok_s"], 1) for s in samples],
        "ttft_ms_all": [round(1000 * s["ttft_s"], 1) for s in samples],
        "token_ids": samples[0]["token_ids"],
    }


def versions() -> dict:
    from importlib.metadata import version

    import psutil

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {"torch": torch.__version__, "torch_threads": torch.get_num_threads(),
            "llama_cpp_python": version("llama-cpp-python"), "gguf": version("gguf"),
            "llama_cpp_threads": psutil.cpu_count(logical=False), "python": platform.python_version(),
            "cpu": cpu_name(), "logical_cpus": psutil.cpu_count(), "wisp_commit": commit}


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.machine()


def markdown(results: list[dict], meta: dict) -> str:
    lines = [f"# CPU: Wisp vs llama.cpp on the demo model ({meta['date']})", "",
             f"{meta['versions']}", "",
             f"1-minute load average before/after (the machine is shared): {meta['load_average_1min']}", "",
             f"greedy, {meta['max_tokens']} new tokens (ignore_eos), median of {meta['runs']} runs after 1 warm-up", "",
             f"`PYTHONPATH=. python bench/llamacpp_cpu_compare.py --out "
             f"bench/results/2026-11-29-cpu-llamacpp --runs {meta['runs']} --max-tokens {meta['max_tokens']}` "
             "(per-run numbers in results.json)", "",
             "| arm | weights | prompt | prompt tokens | TTFT ms | decode tok/s | same tokens as Wisp |",
             "|---|---|---|---|---|---|---|"]
    reference = results[0]
    for result in results:
        for label in PROMPTS:
            row = result[label]
            same = row["token_ids"] == reference[label]["token_ids"]
            lines.append(f"| {result['arm']} | {result['dtype']} | {label} | {row['prompt_tokens']} | "
                         f"{row['ttft_ms_median']:.1f} | {row['decode_tok_s_median']:.1f} | {'yes' if same else 'no'} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()
    load_before = os.getloadavg()
    results = [run_arm("wisp (safetensors)", EngineOptions(device="cpu"), args.runs, args.max_tokens)]
    with tempfile.TemporaryDirectory() as scratch:
        for out_type in GGUF_TYPES:
            path = convert(DEMO_MODEL, Path(scratch) / f"demo-{out_type}.gguf", out_type).path
            results.append(run_arm("llama.cpp (GGUF)", EngineOptions(model=str(path), device="cpu"),
                                   args.runs, args.max_tokens))
    meta = {"date": time.strftime("%Y-%m-%d"), "versions": versions(), "runs": args.runs,
            "max_tokens": args.max_tokens, "load_average_1min": [load_before[0], os.getloadavg()[0]]}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    (args.out / "results.md").write_text(markdown(results, meta))
    print(markdown(results, meta))


if __name__ == "__main__":
    main()
