#!/usr/bin/env bash
# Dense weights in the file's quant types on the H200 (bench/results/2026-12-02-dense-quant/NOTES.md):
#   bash bench/h200_dense_quant.sh OUT_DIR
# The GPU tests of the quantized dense layers, then `wisp bench` on the synthetic Q4_K_M shape: resident and WiSP
# rows with the dense tensors in llama.cpp's Q4_K_M types, then (an --also session on the same experts) with bf16
# dense weights. Everything stops by END_S seconds after the start (each budget's rows are saved as they finish).
set -u
OUT=${1:?usage: bench/h200_dense_quant.sh OUT_DIR}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
END=$((SECONDS + ${END_S:-212}))
timeout ${TESTS_S:-60} python3 -m pytest -q -m gpu tests/gpu/test_dense_quant.py > "$OUT/gpu-tests.txt" 2>&1
tail -3 "$OUT/gpu-tests.txt" | cut -c1-300
timeout $((END - SECONDS)) python3 -m engine.bench.suite --shape qwen3-30b-a3b --quant Q4_K_M ${SUITE_EXTRA:-} \
    --trace resources/traces/qwen3-published_chat-carry44.npz --budgets ${BUDGETS:-16,12,24} --prompt ${PROMPT:-512} \
    --tokens ${TOKENS:-64} --runs ${RUNS:-3} --arms resident,wisp --label "dense weights in the file's types" \
    --also "--dense-weights dtype --budgets ${DTYPE_BUDGETS:-16,12} --label 'bf16 dense weights'" \
    --out "$OUT/suite" > "$OUT/suite.txt" 2>&1
echo "suite rc $? at ${SECONDS}s"
grep -h '"arm"' "$OUT/suite.txt" | python3 -c "
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    print(r['arm'], r.get('budget_gib'), 'tok/s', r.get('decode_tok_s_runs'), 'peak', r.get('peak_gib'), 'plan', r.get('plan_gib'), r.get('error', ''))
"
python3 -m bench.report "$OUT"/suite/*.json > "$OUT/report.txt" 2>&1
(cd "$OUT" && tar czf suite.tgz suite && rm -rf suite)
