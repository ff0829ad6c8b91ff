#!/usr/bin/env bash
# The merged tree on the H200 in one call: GPU tests of what changed, then `wisp bench` rows on the synthetic
# Qwen3-30B-A3B Q4_K_M shape (resident with the word GEMV on and off, WiSP at 12 GiB, the long prompts):
#   WISP_GGUF_DIR=DIR bash bench/h200_merged.sh OUT_DIR      # DIR/peak50: tiny GGUF files made with llama.cpp
set -u
OUT=${1:?usage: bench/h200_merged.sh OUT_DIR}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
TRACE=resources/traces/qwen3-published_chat-carry44.npz
timeout ${TESTS_S:-300} python -m pytest -v -p no:cacheprovider -m gpu tests/gpu/test_hybrid.py \
    tests/gpu/test_quant_kernels.py tests/gpu/test_grouped_gemm.py tests/gpu/test_decode_step.py \
    tests/gpu/test_gguf_engine.py tests/gpu/test_host_tier_cuda.py tests/gpu/test_cuda.py > "$OUT/gpu_tests.log" 2>&1
grep -c PASSED "$OUT/gpu_tests.log"; grep -E "FAILED|ERROR|passed|failed" "$OUT/gpu_tests.log" | tail -12 | cut -c1-300
suite() {  # name, then the suite's arguments
    local name=$1; shift
    timeout ${SUITE_S:-120} python -m bench.params ${PARAMS:-} -- -m engine.bench.suite --shape qwen3-30b-a3b --quant Q4_K_M --trace $TRACE \
        --runs 3 --out "$OUT/$name" "$@" > "$OUT/$name.txt" 2>&1
    tail -4 "$OUT/$name.txt" | cut -c1-400
}
PARAMS=engine.quant.linear.GEMV=byte suite byte-resident --budgets 24 --prompt 512 --tokens 64 --arms resident --label "byte GEMV"
SUITE_S=240 suite word --budgets 12 --prompt 512 --tokens 64 --arms resident,wisp --label "merged tree" \
    --also "--prompt 2048" --also "--prompt 8192 --max-len 8448 --tokens 32 --arms resident"
python -m bench.report "$OUT"/*/*.json > "$OUT/report.txt" 2>&1; tail -30 "$OUT/report.txt" | cut -c1-300
(cd "$OUT" && tar czf rows.tgz byte-resident* word* && rm -rf byte-resident word)
