#!/usr/bin/env bash
# Issue 36, the grouped kernels at prompt shapes, in one run on the GPU machine
# (bench/results/2026-12-02-prefill-kernels/NOTES.md):
#   bash bench/prefill_kernels_h200.sh OUT_DIR
# 1. the GPU tests of the grouped GEMM and of every provider's bits at a swapped configuration (in the background);
# 2. every sweep configuration compiled once in parallel processes (Triton's cache), so the sweep itself times;
# 3. the tile sweep (bench/prefill_moe_probe.py --sweep): Q4_K_M and BF16 layer-steps at 512/2048/8192 tokens;
# 4. the resident prompt step (bench.prefill_profile, no suite) at the engine's tiles and at the sweep's fastest
#    for 512 and for 2048 tokens, as long as time is left.
set -u
OUT=${1:?usage: bench/prefill_kernels_h200.sh OUT_DIR}
DEADLINE=${DEADLINE:-190}
FORMATS=${FORMATS:-Q4_K_M,BF16}
TESTED=${TESTED:-32,64,64,4,3,3,1}
start=$SECONDS
left() { echo $((DEADLINE - (SECONDS - start))); }
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
exec > >(tee -a "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"

echo "== GPU tests at $TESTED, in the background ($(left) s left)"
(timeout 150 python3 -m bench.params engine.quant.grouped_gemm.TILES=$TESTED -- -m pytest -m gpu -q -x -p no:cacheprovider \
    tests/gpu/test_quant_kernels.py::test_providers_give_the_same_bits tests/gpu/test_grouped_gemm.py \
    > "$OUT/gpu_tests.txt" 2>&1; echo "exit $?" >> "$OUT/gpu_tests.txt") &
tests=$!

echo "== compile ($(left) s left)"
configs=$(python3 -c "from bench.prefill_moe_probe import SWEEP; print(' '.join(','.join(map(str, c)) for c in SWEEP))")
for config in $configs; do
    for format in ${FORMATS//,/ }; do
        timeout 90 python3 bench/prefill_moe_probe.py --sweep --formats "$format" --tokens 512 --repeats 1 \
            --configs "$config" > /dev/null 2>&1 &
    done
done
wait $(jobs -p | grep -v "^$tests\$")
echo "== sweep ($(left) s left)"
timeout $(( $(left) - 40 )) python3 bench/prefill_moe_probe.py --sweep --formats "$FORMATS" --tokens 512,2048,8192 \
    --repeats 9 --out "$OUT" | tee "$OUT/sweep_rows.jsonl" | grep '"best"'
best=$(python3 - "$OUT/sweep_rows.jsonl" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.startswith("{")]
rows = [r for r in rows if "kernels_ms" in r and r["format"] == "Q4_K_M"]
for tokens in (512, 2048):
    mine = [r for r in rows if r["tokens"] == tokens]
    print(",".join(map(str, min(mine, key=lambda r: r["kernels_ms"])["config"])) if mine else "")
PY
)
time_tiles=$(echo $best | tr ' ' ';')
echo "fastest for 512 / 2048: $time_tiles"
echo "== prompt step ($(left) s left)"
[ -n "$time_tiles" ] && [ "$(left)" -gt 30 ] && timeout $(( $(left) - 5 )) python3 -m bench.prefill_profile --no-suite \
    --prompts 512,2048 --time-tiles "$time_tiles" --out "$OUT/profile" 2>&1 \
    | grep -E '"what": "(built|prompt step|profiled step)"' | cut -c1-300
wait $tests
tail -5 "$OUT/gpu_tests.txt"
echo "== done ($(left) s left)"
