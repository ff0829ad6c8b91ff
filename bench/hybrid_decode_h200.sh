#!/usr/bin/env bash
# The hybrid qwen3.5-35b-a3b shape (synthetic Q4_K_M experts) decoding on the padded path (CUDA graphs) on the H200:
#   bash bench/hybrid_decode_h200.sh OUT_DIR
# 1. a routing trace (the published statistics assumed for Qwen3.5), 2. `wisp bench` rows resident and paged at
# 12 GiB (one run of 32 tokens), 3. bench/hybrid_decode_profile.py: 8 layers resident, ms per decode step on the
# padded (graphs) and the dynamic path, torch profiler tables of one step of each. At most 90 s in all.
# A check on the CPU: SUITE_ARGS="--layers 4 --device cpu" PROFILE_ARGS="--layers 4 --prompt 32 --steps 2" SCALE=20
set -u
OUT=${1:?usage: bench/hybrid_decode_h200.sh OUT_DIR}
mkdir -p "$OUT"
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$PWD PYTHONUNBUFFERED=1
TRACE="$OUT/qwen35-assumed.npz"
SCALE=${SCALE:-1}
timeout $((12 * SCALE)) python3 -m engine.cli trace synth --shape qwen3.5-35b-a3b --carry-over 0.46 --cover90 130 \
    --top-share 0.0215 --requests 4 --prompt 512 --tokens 96 --seed 1 --out "$TRACE" > "$OUT/trace.txt" 2>&1
tail -1 "$OUT/trace.txt" | cut -c1-300
timeout $((50 * SCALE)) python3 -m engine.bench.suite --shape qwen3.5-35b-a3b --quant Q4_K_M --trace "$TRACE" \
    --budgets 12 --prompt 512 --tokens 32 --runs 1 --arms resident,wisp --decode graphs --label "hybrid decode on the padded path" \
    --out "$OUT/suite" ${SUITE_ARGS:-} > "$OUT/suite.txt" 2>&1
echo "suite rc $?"
grep '"arm"' "$OUT/suite.txt" | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print({k: r.get(k) for k in ("arm", "budget_gib", "mode", "decode_tok_s", "ttft_s", "step_gpu_ms",
                                 "decode_misses", "error")})'
tail -3 "$OUT/suite.txt" | cut -c1-300
timeout $((28 * SCALE)) python3 bench/hybrid_decode_profile.py --shape qwen3.5-35b-a3b --layers 8 --quant Q4_K_M \
    --prompt 512 --out "$OUT/profile" ${PROFILE_ARGS:-} > "$OUT/profile-run.txt" 2>&1
echo "profile rc $?"
grep -v USDT "$OUT/profile-run.txt" | tail -4 | cut -c1-400
(cd "$OUT" && tar czf suite.tgz suite && rm -rf suite && rm -f "$TRACE")
