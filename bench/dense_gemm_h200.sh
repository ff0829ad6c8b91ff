#!/usr/bin/env bash
# Quantized dense matrices' long steps (prompts) on the H200: the GEMM that dequantizes weight tiles in its K loop
# (engine.quant.quant_matmul) against dequantize-then-matmul (quant_matmul.AUTO_MAX_ROWS=0):
#   bash bench/dense_gemm_h200.sh OUT_DIR
# 1. its GPU tests; 2. QuantLinear's long step at Qwen3-30B-A3B's attention shapes, 512 and 2048 rows, both ways
# (CUDA events, median of 5 after 2 warm-ups; lm_head is left out: the engine computes logits for each sequence's
# last row only, a decode-sized step); 3. `wisp bench` resident and WiSP 16 GiB rows with the switch on, then off.
# Everything stops by END_S seconds after the start. TILE_SWEEP="BM,BN,WARPS,STAGES ..." times other tile
# configurations too; SKIP_SUITE=1 stops after the timing.
set -u
OUT=${1:?usage: bench/dense_gemm_h200.sh OUT_DIR}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
END=$((SECONDS + ${END_S:-100}))
left() {  # the smaller of $1 seconds and what is left of END_S (at least 1)
    local rest=$((END - SECONDS)); [ "$rest" -lt 1 ] && rest=1; [ "$1" -lt "$rest" ] && echo "$1" || echo "$rest"
}

timeout $(left ${TESTS_S:-20}) python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_quant_matmul.py \
    > "$OUT/gpu-tests.txt" 2>&1
echo "tests rc $? at ${SECONDS}s"; tail -3 "$OUT/gpu-tests.txt" | cut -c1-300

timing() {  # a name for its output file; the tiles are $TILES (or the default)
timeout $(left ${TIMING_S:-20}) python3 - > "$OUT/$1.txt" 2>&1 <<'EOF'
import json, os, statistics, sys
import torch
from engine.quant import grouped_gemm, quant_matmul as qm
from engine.quant.linear import QuantLinearSpec
from engine.quant.quant_modules import QuantLinear
from engine.quant.synthetic import random_blocks
from engine.quant.types import Q4_K, Q6_K

if not torch.cuda.is_available():
    sys.exit("timing needs CUDA")
qm.TILES = os.environ.get("TILES") or None
cuda = torch.device("cuda")
SHAPES = {"q": (Q4_K, 4096, 2048), "k": (Q4_K, 512, 2048), "v": (Q6_K, 512, 2048), "o": (Q4_K, 2048, 4096)}

def median_ms(fn, reps=5):
    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(); fn(); stop.record(); torch.cuda.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)

print("tiles (BM, BN, warps, stages):", qm.tile_configuration())
rows_out, totals = [], {}
with torch.inference_mode():
    for name, (qtype, n, k) in SHAPES.items():
        spec = QuantLinearSpec(qtype, n, k)
        blocks = random_blocks(spec, 1, torch.Generator(device=cuda).manual_seed(0), cuda).reshape(-1)
        module = QuantLinear(blocks, spec)
        for m in (512, 2048):
            x = torch.randn(m, k, device=cuda).bfloat16()
            timing = {}
            for switch in ("1", "0"):
                qm.AUTO_MAX_ROWS = 1 << 30 if switch == "1" else 0
                timing[switch] = median_ms(lambda: module(x))
                out = module(x)
                if switch == "1":
                    fused = out
            diff = ((fused.float() - out.float()).abs().max() / out.float().abs().max()).item()
            row = {"matrix": name, "type": qtype.name, "N": n, "K": k, "M": m, "gemm_ms": round(timing["1"], 4),
                   "dequant_ms": round(timing["0"], 4), "speedup": round(timing["0"] / timing["1"], 3),
                   "max_rel_diff": diff}
            rows_out.append(row)
            print(json.dumps(row))
            for key, switch in (("gemm", "1"), ("dequant", "0")):
                totals[(m, key)] = totals.get((m, key), 0.0) + timing[switch]
for m in (512, 2048):
    print(f"M={m}: q+k+v+o per layer {totals[(m, 'gemm')]:.3f} ms fused, {totals[(m, 'dequant')]:.3f} ms dequantized;"
          f" x48 layers {48 * totals[(m, 'gemm')]:.1f} vs {48 * totals[(m, 'dequant')]:.1f} ms")
print("launched with (type, BM, BN, warps) -> stages:", {(o["DOWN_TYPE"], o["BM"], o["BN"], o["num_warps"]):
      o["num_stages"] for o in grouped_gemm.FITTED.values() if o})
EOF
echo "$1 rc $? at ${SECONDS}s"; cut -c1-300 "$OUT/$1.txt"
}
timing timing
for tiles in ${TILE_SWEEP:-}; do  # e.g. TILE_SWEEP="128,128,8,1 64,64,4,3": other BM,BN,NUM_WARPS,NUM_STAGES
    TILES=$tiles timing "timing-${tiles//,/-}"
done
[ -n "${SKIP_SUITE:-}" ] && { echo "done at ${SECONDS}s"; exit 0; }

for switch in 1 0; do
    rows=$([ "$switch" = 1 ] && echo 1073741824 || echo 0)  # every long step runs quant_matmul, or none does
    timeout $(left ${SUITE_S:-45}) python3 -m bench.params engine.quant.quant_matmul.AUTO_MAX_ROWS=$rows -- \
        -m engine.bench.suite --shape qwen3-30b-a3b \
        --quant Q4_K_M --trace resources/traces/qwen3-published_chat-carry44.npz --budgets 16 --prompt 512 \
        --tokens 32 --runs 3 --arms resident,wisp --label "dense GEMM $switch" \
        --out "$OUT/suite-gemm$switch" > "$OUT/suite-gemm$switch.txt" 2>&1
    echo "suite dense GEMM $switch rc $? at ${SECONDS}s"
    grep -h '"arm"' "$OUT/suite-gemm$switch.txt" | python3 -c "
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print(r['arm'], r.get('budget_gib'), 'ttft', r.get('ttft_s_median'), 'prefill tok/s', r.get('prefill_tok_s'),
          'decode tok/s', r.get('decode_tok_s'), r.get('error', ''))
"
done
ls "$OUT"/suite-gemm*/*.json > /dev/null 2>&1 && python3 -m bench.report "$OUT"/suite-gemm*/*.json > "$OUT/report.txt" 2>&1
tail -12 "$OUT/report.txt" 2>/dev/null | cut -c1-300
(cd "$OUT" && tar czf suites.tgz suite-gemm1 suite-gemm0 2>/dev/null && rm -rf suite-gemm1 suite-gemm0)
echo "done at ${SECONDS}s"
