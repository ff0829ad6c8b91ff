"""One Gated DeltaNet layer's token mixing at a published shape, the torch forms against fla's kernels: the short
conv (torch either way), the chunked form for a prompt, the recurrent form for one decode step of a batch.
CUDA events, median of --reps after 2 warm-ups, bf16 inputs and fp32 states as the engine runs them.
  python3 bench/hybrid_fla_timing.py --shape qwen3.5-35b-a3b --out OUT/timing.json
With FLA_CACHE_MODE=disabled fla autotunes its chunked kernels instead of running engine/model/fla_configs; the
configurations it picks are printed (and saved) so that they can be pinned."""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch

from engine.model import delta_rule_kernels, gated_deltanet
from engine.model.shapes import shape


def median_ms(fn, reps: int) -> float:
    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def inputs(linear, tokens: int, device, seed: int = 0):
    """q, k [T, Hk, Dk], v [T, H, Dv] (bf16), g fp32, beta bf16 [T, H], a state [H, Dk, Dv]; for a decode step the T
    rows are T sequences."""
    torch.manual_seed(seed)
    key_shape, heads = (tokens, linear.num_key_heads, linear.key_head_dim), linear.num_value_heads
    q, k = (torch.randn(key_shape, device=device, dtype=torch.bfloat16) for _ in range(2))
    v = torch.randn(tokens, heads, linear.value_head_dim, device=device, dtype=torch.bfloat16)
    g = -torch.nn.functional.softplus(torch.randn(tokens, heads, device=device))
    beta = torch.sigmoid(torch.randn(tokens, heads, device=device)).to(torch.bfloat16)
    state = torch.randn(heads, linear.key_head_dim, linear.value_head_dim, device=device) * 0.1
    return q, k, v, g, beta, state


def autotune_picks() -> dict:
    """The configurations fla's autotuners chose in this process, by kernel."""
    from fla.ops.utils.cache import CachedAutotuner

    picks = {}
    for module in [m for name, m in sys.modules.items() if name.startswith("fla.") and m is not None]:
        for value in vars(module).values():
            tuner = value
            while tuner is not None and not isinstance(tuner, CachedAutotuner):
                tuner = getattr(tuner, "fn", None)
            if tuner is not None and tuner.cache:
                picks[tuner.kernel_name] = {str(key): str(config) for key, config in tuner.cache.items()}
    return picks


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", default="qwen3.5-35b-a3b")
    parser.add_argument("--prompts", default="512,2048")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--out")
    options = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("timing needs CUDA")
    device, linear = torch.device("cuda"), shape(options.shape).linear
    fla = delta_rule_kernels.kernels_for("cuda")
    if fla.name != "fla":
        sys.exit("fla does not import")
    from engine.model import delta_rule_fla

    rows = []
    weight = torch.randn(linear.conv_dim, linear.conv_kernel_dim, device=device, dtype=torch.bfloat16)
    for tokens in map(int, options.prompts.split(",")):
        q, k, v, g, beta, state = inputs(linear, tokens, device)
        mixed = torch.randn(tokens, linear.conv_dim, device=device, dtype=torch.bfloat16)
        history = torch.zeros(linear.conv_kernel_dim - 1, linear.conv_dim, device=device, dtype=torch.bfloat16)
        row = {"step": f"prefill {tokens}",
               "conv_ms": median_ms(lambda: gated_deltanet.causal_conv(mixed, history, weight), options.reps)}
        for kernels in (delta_rule_kernels.TORCH, fla):
            row[f"{kernels.name}_ms"] = median_ms(lambda: kernels.chunked(q, k, v, g, beta, state), options.reps)
        rows.append(row)
    for batch in map(int, options.batches.split(",")):
        q, k, v, g, beta, _ = inputs(linear, batch, device)
        states = inputs(linear, 1, device, seed=1)[-1].expand(batch, -1, -1, -1).contiguous()
        mixed = torch.randn(batch, 1, linear.conv_dim, device=device, dtype=torch.bfloat16)
        history = torch.zeros(batch, linear.conv_kernel_dim - 1, linear.conv_dim, device=device, dtype=torch.bfloat16)
        row = {"step": f"decode batch {batch}",
               "conv_ms": median_ms(lambda: gated_deltanet.causal_conv(mixed, history, weight), options.reps)}
        for kernels in (delta_rule_kernels.TORCH, fla):
            row[f"{kernels.name}_ms"] = median_ms(lambda: kernels.recurrent_step(q, k, v, g, beta, states),
                                                  options.reps)
        rows.append(row)
    configs = "pinned (engine/model/fla_configs)" if delta_rule_fla.IS_PINNED else "autotuned"
    print(f"{options.shape}: {linear.num_key_heads} key heads x {linear.key_head_dim}, {linear.num_value_heads} "
          f"value heads x {linear.value_head_dim}; fla chunked configs {configs}; {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}")
    print(f"{'step':<16} {'conv ms':>8} {'torch ms':>9} {'fla ms':>8} {'torch/fla':>9}")
    for row in rows:
        print(f"{row['step']:<16} {row['conv_ms']:8.3f} {row['torch_ms']:9.3f} {row['fla_ms']:8.3f} "
              f"{row['torch_ms'] / row['fla_ms']:9.2f}")
    picks = {} if delta_rule_fla.IS_PINNED else autotune_picks()
    for kernel, chosen in picks.items():
        print(f"autotuned {kernel}: {chosen}")
    if options.out:
        with open(options.out, "w") as f:
            json.dump({"shape": options.shape, "configs": configs, "rows": rows, "autotune_picks": picks,
                       "gpu": torch.cuda.get_device_name(), "torch": torch.__version__}, f, indent=2)


if __name__ == "__main__":
    main()
