#!/usr/bin/env bash
# The wide-load decode GEMV (engine/quant/wide_gemv.py) on the H200 in one call (bench/results/2026-12-02-decode-3):
#   bash bench/h200_decode_wide.sh OUT_DIR
# 1. the GEMV probe at the expert shape (byte, word and wide kernels; its last line: the fastest wide splits),
# 2. the quant GPU tests, 3. profile_decode's resident step with the wide and the word GEMV (the probe's splits),
# 4. `wisp bench` rows (resident, WiSP at 12 GiB) with the wide GEMV, in what is left of LIMIT_S seconds.
set -u
OUT=${1:?usage: bench/h200_decode_wide.sh OUT_DIR}
LIMIT_S=${LIMIT_S:-228}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
TRACE=resources/traces/qwen3-published_chat-carry44.npz
left() { echo $((LIMIT_S - SECONDS)); }
echo "== probe ($SECONDS s)"
timeout 80 python bench/quant_gemv_probe.py --steps 32 --tokens 1 --formats Q4_K_M Q4_K --no-bf16 \
    > "$OUT/probe.jsonl" 2> "$OUT/probe.err"
cut -c1-230 "$OUT/probe.jsonl"; tail -3 "$OUT/probe.err" | cut -c1-300
SPLITS=$(grep -o '"wide_splits": "[^"]*"' "$OUT/probe.jsonl" | sed 's/.*: "//; s/"$//')
PARAMS=()  # engine.quant.linear's bench parameters for the runs below (bench/params.py)
if [ -n "$SPLITS" ]; then PARAMS+=("engine.quant.linear.WIDE_SPLITS=$(python3 -c "import sys; print({k: None if v == 'none' else tuple(map(int, v.split(','))) for k, v in (i.split('=') for i in sys.argv[1].split(';'))})" "$SPLITS")"); fi
GEMVS=wide,word
if ! grep -q '"case": "wide_gemv".*"us"' "$OUT/probe.jsonl"; then  # no wide split ran: measure the rest without it
    PARAMS+=("engine.quant.linear.GEMV=word"); GEMVS=word
fi
echo "params: ${PARAMS[*]:-none} ($SECONDS s)"
timeout ${TESTS_S:-120} python -m bench.params ${PARAMS[@]+"${PARAMS[@]}"} -- -m pytest -v -p no:cacheprovider -m gpu tests/gpu/test_quant_kernels.py > "$OUT/gpu-tests.txt" 2>&1
echo "passed $(grep -c PASSED "$OUT/gpu-tests.txt") failed $(grep -c FAILED "$OUT/gpu-tests.txt")"
grep -E "^(FAILED|ERROR)|passed|failed" "$OUT/gpu-tests.txt" | tail -8 | cut -c1-300
echo "== profile ($SECONDS s)"
timeout $(( $(left) < 75 ? $(left) : 75 )) python -m bench.params ${PARAMS[@]+"${PARAMS[@]}"} -- -m bench.profile_decode --quant Q4_K_M --trace $TRACE \
    --arms resident --tokens 32 --prompt 512 --gemv $GEMVS --out "$OUT/profile.json" > "$OUT/profile.txt" 2>&1
grep -E '^\{"arm"' "$OUT/profile.txt" | cut -c1-330; tail -2 "$OUT/profile.txt" | cut -c1-300
echo "== suite ($SECONDS s, $(left) s left)"
if [ "$(left)" -gt 20 ]; then
    timeout $(left) python -m bench.params ${PARAMS[@]+"${PARAMS[@]}"} -- -m engine.bench.suite --shape qwen3-30b-a3b --quant Q4_K_M --trace $TRACE --budgets 12 \
        --prompt 512 --tokens 64 --runs 3 --arms resident,wisp --label "$GEMVS GEMV, splits ${SPLITS:-default}" --out "$OUT/suite" \
        > "$OUT/suite.txt" 2>&1
    grep -E '"arm"' "$OUT/suite.txt" | cut -c1-300; tail -2 "$OUT/suite.txt" | cut -c1-300
fi
[ -d "$OUT/suite" ] && (cd "$OUT" && tar czf suite.tgz suite && rm -rf suite)
echo "== done ($SECONDS s)"
