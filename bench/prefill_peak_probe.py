"""Device memory of one prompt step, resident, on the synthetic Qwen3-30B-A3B Q4_K_M shape: the peak above what the
engine holds before the prompt, for each grouped-GEMM tile configuration given (engine.quant.grouped_gemm.sweep_tiles;
"default": the engine's tables), so a growth of the prompt's transient memory can be traced to its tiles. One JSON
line per (configuration, prompt).

    python bench/prefill_peak_probe.py --prompts 512,2048 --configs "default;64,32,64,8,3"
"""

import argparse
import gc
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from engine.api import EngineOptions  # noqa: E402
from engine.bench.suite import decode_once, plan_for  # noqa: E402
from engine.bench.synthetic import IdOnlyTokenizer, synthetic_weights  # noqa: E402
from engine.model.shapes import shape  # noqa: E402
from engine.quant.grouped_gemm import sweep_tiles  # noqa: E402
from engine.runtime.builder import assemble_engine  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="qwen3-30b-a3b")
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--quant", default="Q4_K_M")
    parser.add_argument("--prompts", default="512,2048")
    parser.add_argument("--configs", default="default")
    parser.add_argument("--chunk", type=int, default=0, help="the engine's prefill_chunk (0: the whole prompt)")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    weights = synthetic_weights(shape(args.shape, num_layers=args.layers), device, experts_on_host=False,
                                quant=args.quant)
    max_len = max(int(p) for p in args.prompts.split(",")) + 64
    plan = plan_for(weights, "resident", None, None, batch=1, max_len=max_len)
    engine = assemble_engine(weights, IdOnlyTokenizer(), EngineOptions(device=device.type, prefill_chunk=args.chunk),
                             plan, device, max_len)
    decode_once(engine, prompt=64, tokens=2, batch=1, seed=0)  # kernels compiled before any measurement
    for config in args.configs.split(";"):
        with sweep_tiles(None if config == "default" else config):
            peaks(engine, device, args, config)


def peaks(engine, device, args, config: str) -> None:
    for prompt in (int(p) for p in args.prompts.split(",")):
        gc.collect()
        if device.type == "cuda":
            torch.cuda.synchronize()
            held = torch.cuda.memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)
        decode_once(engine, prompt=prompt, tokens=1, batch=1, seed=1)
        peak = torch.cuda.max_memory_allocated(device) - held if device.type == "cuda" else 0
        print(json.dumps({"config": config, "prompt": prompt, "chunk": args.chunk,
                          "peak_over_held_mib": round(peak / 2**20, 1),
                          "per_token_kib": round(peak / 1024 / prompt, 1)}), flush=True)


if __name__ == "__main__":
    main()
