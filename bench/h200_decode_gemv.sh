#!/usr/bin/env bash
# Issue 37's word-wide quantized GEMV on the H200 (bench/results/2026-12-02-decode-2/NOTES.md):
#   bash bench/h200_decode_gemv.sh OUT_DIR [probe|final]
# probe: the quant GPU tests, the GEMV probe (old kernel beside the word kernel's splits) and the resident decode
# profile at 512 tokens of context; final: the same, then `wisp bench` rows on the synthetic Q4_K_M shape.
set -u
OUT=${1:?usage: bench/h200_decode_gemv.sh OUT_DIR [probe|rows]}
PHASE=${2:-probe}
mkdir -p "$OUT"
export PYTHONPATH=$PWD
TRACE=resources/traces/qwen3-twin_code.npz
profile() {
    timeout 150 python -m bench.profile_decode --quant Q4_K_M --trace $TRACE --arms resident --tokens 32 \
        --prompt 512 --out "$OUT/p512.json" > "$OUT/profile-512.txt" 2>&1
    tail -3 "$OUT/profile-512.txt" | cut -c1-600
}
timeout 150 python -m pytest -q -m gpu -x tests/gpu/test_quant_kernels.py > "$OUT/gpu-tests.txt" 2>&1
tail -3 "$OUT/gpu-tests.txt"
timeout 120 python bench/quant_gemv_probe.py --steps 64 --tokens 1 > "$OUT/probe.jsonl" 2>&1
grep -v '"case": "gemv"' "$OUT/probe.jsonl" | cut -c1-220 | head -50; grep '"case": "gemv"' "$OUT/probe.jsonl"
profile
if [ "$PHASE" = final ]; then
    timeout ${SUITE_S:-240} python -m engine.bench.suite --quant Q4_K_M --trace resources/traces/qwen3-published_chat-carry44.npz \
        --budgets 24,16,12,8 --prompt 512 --tokens 64 --runs 3 --arms resident,wisp \
        --label "synthetic Q4_K_M experts, word GEMV" --out "$OUT/wisp-q4km" > "$OUT/suite.txt" 2>&1
    tail -20 "$OUT/suite.txt" | cut -c1-400
    (cd "$OUT" && tar czf suite.tgz wisp-q4km* && rm -rf wisp-q4km*)
fi
